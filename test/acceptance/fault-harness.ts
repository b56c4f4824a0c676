/**
 * Harness of the webhook fault test (webhook-fault.test.ts): the delivery plan, GitHub-like senders
 * that redeliver on connection errors, and a supervisor that starts, SIGKILLs and restarts the real
 * daemon on one fixed port.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { signBody } from '../../src/github/verify.js';
import { prng } from '../helpers/check.js';
import { BIN, fakeEngineConfig, pidAlive, ROOT } from '../helpers/cli.js';
export const SECRET = 'fault-test-secret-5e0b7d2a91c4';
export const FAULT_ENGINE = join(ROOT, 'test/fixtures/bin/fault-engine.mjs');
export const TOTAL = Number(process.env.FAULT_TOTAL ?? 2000);
export const ITEMS = 50;
export const SENDERS = 8;
export const DUP_RATE = 0.2;
export const BAD_RATE = 0.05;
export const KILLS = 2;
export const CONCURRENCY = 4;
export const REPO = 'acme/widgets';

// Bounds on every wait, so a wedged daemon fails the test instead of hanging it.
export const READY_MS = 30_000;
export const EXIT_MS = 15_000;
export const ATTEMPT_MS = 10_000;
export const DELIVERY_DEADLINE_MS = 120_000;
export const SEND_PHASE_MS = 240_000;
export const DRAIN_MS = 150_000;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export function shuffle<T>(list: T[], rnd: () => number): T[] {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [list[i], list[j]] = [list[j] as T, list[i] as T];
  }
  return list;
}

export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export async function waitFor(check: () => boolean, ms: number, what: string, everyMs = 25): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** A port that was free a moment ago, so every daemon of this run can listen on the same one. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface Delivery {
  id: string;
  item: number;
  /** Position within its work item (1..k) for valid deliveries; 0 for bad signatures. */
  n: number;
  bad: boolean;
  dup: boolean;
  sender: number;
  body: string;
  signature: string;
}

export const TEMPLATE = JSON.parse(
  readFileSync(join(ROOT, 'test/fixtures/github/issue_comment.created.json'), 'utf8'),
) as {
  issue: Record<string, unknown> & { number: number };
  comment: Record<string, unknown> & { id: number; body: string };
};

/** The exact bytes GitHub would send: the fixture's shape, this work item, this marker. */
export function payloadFor(item: number, n: number, id: string, commentId: number): string {
  const issueUrl = `https://api.github.com/repos/${REPO}/issues/${item}`;
  const payload = {
    ...TEMPLATE,
    issue: {
      ...TEMPLATE.issue,
      number: item,
      url: issueUrl,
      html_url: `https://github.com/${REPO}/issues/${item}`,
      comments_url: `${issueUrl}/comments`,
      title: `Fault test work item ${item}`,
    },
    comment: {
      ...TEMPLATE.comment,
      id: commentId,
      issue_url: issueUrl,
      html_url: `https://github.com/${REPO}/issues/${item}#issuecomment-${commentId}`,
      body: `@the-loop please handle SEQ ${item}:${n} DELIVERY ${id}`,
      author_association: 'MEMBER',
    },
  };
  return JSON.stringify(payload);
}

export function makePlan(seed: number): Delivery[] {
  const rnd = prng(seed);
  const slots = shuffle(
    Array.from({ length: TOTAL }, (_, i) => (i % ITEMS) + 1),
    rnd,
  );
  const badIdx = new Set(shuffle([...slots.keys()], rnd).slice(0, Math.round(TOTAL * BAD_RATE)));
  const dupIdx = new Set(shuffle([...slots.keys()], rnd).slice(0, Math.round(TOTAL * DUP_RATE)));
  const next = new Map<number, number>();
  return slots.map((item, i) => {
    const id = randomUUID();
    const bad = badIdx.has(i);
    const n = bad ? 0 : (next.get(item) ?? 0) + 1;
    if (!bad) next.set(item, n);
    const body = payloadFor(item, n, id, 4_000_000_000 + i);
    // Never valid: a wrong secret, the signature of other bytes, or a malformed header.
    const signature = !bad
      ? signBody(SECRET, body)
      : i % 3 === 0
        ? signBody(`${SECRET}-wrong`, body)
        : i % 3 === 1
          ? signBody(SECRET, `${body} `)
          : `sha256=${'0'.repeat(63)}g`;
    return { id, item, n, bad, dup: dupIdx.has(i), sender: (item - 1) % SENDERS, body, signature };
  });
}

/** The daemon's config: the fault engine, one repository, `CONCURRENCY` turns at once. */
export function faultConfig(repoDir: string, port: number, engineLog: string): Record<string, unknown> {
  return {
    dataDir: 'data',
    log: { level: 'info' },
    server: { host: '127.0.0.1', port },
    webhook: { secret: SECRET },
    repos: { [REPO]: { path: repoDir } },
    // pollSeconds: requeued work is also picked up without a new delivery to wake the dispatcher.
    dispatch: { concurrency: CONCURRENCY, pollSeconds: 0.2, closeGraceSeconds: 2 },
    defaults: { engine: 'fault', backstopSeconds: 60, killGraceSeconds: 0.5 },
    // Like the fake engine: unsandboxed (the harness watches its log and pids from outside).
    sandbox: { mode: 'none' },
    gateway: { port: 0 },
    // The fake engine's declaration, with the fault engine's binary and log.
    engines: {
      fault: (
        fakeEngineConfig('', { binary: FAULT_ENGINE, env: { FAULT_ENGINE_LOG: engineLog } })
          .engines as Record<string, unknown>
      ).fake,
    },
  };
}

export interface DaemonProc {
  child: ChildProcess;
  pid: number;
  stdout: string;
  stderr: string;
  expectedExit: boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitedAt: number | undefined;
}

/** Starts, kills and restarts the daemon: a real child process on one fixed port. */
export class Supervisor {
  current: DaemonProc | undefined;
  readonly started: DaemonProc[] = [];
  readonly unexpectedExits: string[] = [];
  kills = 0;
  private restarting: Promise<void> | undefined;
  stopping = false;

  constructor(
    private readonly cwd: string,
    private readonly env: Record<string, string>,
    private readonly port: number,
  ) {}

  async start(): Promise<DaemonProc> {
    const child = spawn(process.execPath, [BIN, 'serve', '--port', String(this.port)], {
      cwd: this.cwd,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    if (child.pid === undefined) throw new Error('could not start the daemon');
    const proc: DaemonProc = {
      child,
      pid: child.pid,
      stdout: '',
      stderr: '',
      expectedExit: false,
      exitedAt: undefined,
      exited: new Promise((resolve) =>
        child.once('exit', (code, signal) => {
          proc.exitedAt = Date.now();
          resolve({ code, signal });
        }),
      ),
    };
    this.started.push(proc);
    this.current = proc;
    child.stdout?.setEncoding('utf8').on('data', (c: string) => {
      proc.stdout += c;
    });
    child.stderr?.setEncoding('utf8').on('data', (c: string) => {
      proc.stderr = (proc.stderr + c).slice(-20_000);
    });
    void proc.exited.then(({ code, signal }) => {
      if (proc.expectedExit) return;
      this.unexpectedExits.push(
        `daemon ${proc.pid} exited on its own (${signal ?? `code ${code}`}): ${proc.stderr.slice(-2000)}`,
      );
      // Keep the run going so the rest of the evidence is collected; the test fails on this anyway.
      if (!this.stopping && this.current === proc) this.restart();
    });
    const url = `http://127.0.0.1:${this.port}/gh-webhook`;
    await waitFor(
      () => proc.stdout.includes(`  webhook   ${url}`) || proc.exitedAt !== undefined,
      READY_MS,
      `daemon ${proc.pid} to listen`,
    );
    if (proc.exitedAt !== undefined) {
      throw new Error(`daemon ${proc.pid} exited while starting:\n${proc.stdout}\n${proc.stderr}`);
    }
    return proc;
  }

  restart(): Promise<void> {
    this.restarting ??= this.start().then(
      () => {
        this.restarting = undefined;
      },
      (error: unknown) => {
        this.restarting = undefined;
        throw error;
      },
    );
    return this.restarting;
  }

  async settled(): Promise<void> {
    if (this.restarting) await this.restarting;
  }

  /** SIGKILL the daemon; `whileDown` runs after it is gone and before the next one starts. */
  async kill(whileDown?: () => void): Promise<void> {
    await this.settled();
    const victim = this.current;
    if (!victim || victim.exitedAt !== undefined) throw new Error('no daemon to kill');
    victim.expectedExit = true;
    process.kill(victim.pid, 'SIGKILL');
    // Wait for the exit (and Node's reaping of it), so the dead pid is really dead to the next daemon.
    await withTimeout(victim.exited, EXIT_MS, `SIGKILLed daemon ${victim.pid} to exit`);
    this.kills += 1;
    whileDown?.();
    await this.restart();
  }

  async stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
    this.stopping = true;
    await this.settled();
    const proc = this.current;
    if (!proc || proc.exitedAt !== undefined) throw new Error('no daemon to stop');
    proc.expectedExit = true;
    process.kill(proc.pid, 'SIGTERM');
    return withTimeout(proc.exited, EXIT_MS, `daemon ${proc.pid} to stop on SIGTERM`);
  }

  /** Last resort in cleanup: only the daemons this test started, by pid. */
  killAll(): void {
    this.stopping = true;
    for (const proc of this.started) {
      if (proc.exitedAt === undefined) {
        proc.expectedExit = true;
        try {
          process.kill(proc.pid, 'SIGKILL');
        } catch {
          // Already gone.
        }
      }
    }
  }
}

export interface Answer {
  status: number;
  text: string;
}

export function postOnce(port: number, d: Delivery): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/gh-webhook',
        method: 'POST',
        agent: false,
        timeout: ATTEMPT_MS,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(d.body),
          'user-agent': 'GitHub-Hookshot/fault-test',
          'x-github-event': 'issue_comment',
          'x-github-delivery': d.id,
          'x-hub-signature-256': d.signature,
        },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: text.trim() }));
        res.on('error', reject);
        res.on('close', () => {
          if (!res.complete) reject(new Error('response cut short'));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('request timed out')));
    req.on('error', reject);
    req.end(d.body);
  });
}

export interface Stats {
  requests: number;
  connectionErrors: number;
  unavailable: number;
  answers: Map<string, Answer[]>;
}

/** GitHub-like delivery: resend the same id and bytes until an HTTP answer comes back. */
export async function deliver(port: number, d: Delivery, stats: Stats): Promise<Answer> {
  const deadline = Date.now() + DELIVERY_DEADLINE_MS;
  for (let attempt = 1; ; attempt++) {
    if (Date.now() > deadline) {
      throw new Error(
        `delivery ${d.id}: no HTTP answer within ${DELIVERY_DEADLINE_MS} ms (${attempt} tries)`,
      );
    }
    stats.requests += 1;
    let answer: Answer;
    try {
      answer = await postOnce(port, d);
    } catch {
      stats.connectionErrors += 1;
      await sleep(15 + Math.random() * 35);
      continue;
    }
    if (answer.status === 503) {
      // "could not store the delivery; try again": not stored, so redelivering is right.
      stats.unavailable += 1;
      await sleep(50);
      continue;
    }
    const list = stats.answers.get(d.id) ?? [];
    list.push(answer);
    stats.answers.set(d.id, list);
    return answer;
  }
}

export interface EngineLine {
  pid: number;
  marker: string | null;
  sessionId: string;
  t: number;
}

/** A live process that is one of our fake engines (not a recycled pid). Zombies count as gone. */
export function engineAlive(pid: number): boolean {
  if (!pidAlive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (/^\d+ \(.*\) Z/.test(stat)) return false;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('fault-engine.mjs');
  } catch {
    return false;
  }
}
