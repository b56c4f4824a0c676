/**
 * The webhook fault test (issue 3, invariant 5: nothing accepted is lost or done twice).
 *
 * 2,000 signed deliveries across 50 work items from 8 concurrent senders — 20% sent twice, 5% with
 * bad signatures — to a real `the-loop serve` child process that is SIGKILLed twice at random points
 * and restarted on the same port. Senders behave like GitHub redelivery: a request that fails with a
 * connection error is sent again, same id, same bytes, until it gets an HTTP answer. Afterwards the
 * registry and the fake engine's log must show every valid delivery stored once, run once to
 * success, in arrival order per work item; no bad-signature delivery stored or run.
 *
 * Set FAULT_SEED to replay a plan (timing still varies: the kills land wherever they land).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { signBody } from '../../src/github/verify.js';
import { BIN, pidAlive, ROOT } from '../helpers/cli.js';

const SECRET = 'fault-test-secret-5e0b7d2a91c4';
const FAULT_ENGINE = join(ROOT, 'test/fixtures/bin/fault-engine.mjs');
const TOTAL = Number(process.env.FAULT_TOTAL ?? 2000);
const ITEMS = 50;
const SENDERS = 8;
const DUP_RATE = 0.2;
const BAD_RATE = 0.05;
const KILLS = 2;
const CONCURRENCY = 4;
const REPO = 'acme/widgets';

// Bounds on every wait, so a wedged daemon fails the test instead of hanging it.
const READY_MS = 30_000;
const EXIT_MS = 15_000;
const ATTEMPT_MS = 10_000;
const DELIVERY_DEADLINE_MS = 120_000;
const DRAIN_MS = 150_000;

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Small seeded PRNG (mulberry32) for the plan: which item, which duplicates, which bad signatures. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle<T>(list: T[], rnd: () => number): T[] {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(rnd() * (i + 1));
    [list[i], list[j]] = [list[j] as T, list[i] as T];
  }
  return list;
}

async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
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

async function waitFor(check: () => boolean, ms: number, what: string, everyMs = 25): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** A port that was free a moment ago, so every daemon of this run can listen on the same one. */
function freePort(): Promise<number> {
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

interface Delivery {
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

const TEMPLATE = JSON.parse(
  readFileSync(join(ROOT, 'test/fixtures/github/issue_comment.created.json'), 'utf8'),
) as {
  issue: Record<string, unknown> & { number: number };
  comment: Record<string, unknown> & { id: number; body: string };
};

/** The exact bytes GitHub would send: the fixture's shape, this work item, this marker. */
function payloadFor(item: number, n: number, id: string, commentId: number): string {
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

function makePlan(seed: number): Delivery[] {
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

interface DaemonProc {
  child: ChildProcess;
  pid: number;
  stdout: string;
  stderr: string;
  expectedExit: boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  exitedAt: number | undefined;
}

/** Starts, kills and restarts the daemon: a real child process on one fixed port. */
class Supervisor {
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

interface Answer {
  status: number;
  text: string;
}

function postOnce(port: number, d: Delivery): Promise<Answer> {
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

interface Stats {
  requests: number;
  connectionErrors: number;
  unavailable: number;
  answers: Map<string, Answer[]>;
}

/** GitHub-like delivery: resend the same id and bytes until an HTTP answer comes back. */
async function deliver(port: number, d: Delivery, stats: Stats): Promise<Answer> {
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

interface EngineLine {
  pid: number;
  marker: string | null;
  sessionId: string;
  t: number;
}

/** A live process that is one of our fake engines (not a recycled pid). Zombies count as gone. */
function engineAlive(pid: number): boolean {
  if (!pidAlive(pid)) return false;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    if (/^\d+ \(.*\) Z/.test(stat)) return false;
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('fault-engine.mjs');
  } catch {
    return false;
  }
}

const sample = <T>(list: T[]) => list.slice(0, 10);

describe('webhook fault test: SIGKILLs, redeliveries, duplicates and bad signatures', () => {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-fault-'));
  let supervisor: Supervisor | undefined;
  let engineLog = '';

  afterAll(() => {
    supervisor?.killAll();
    // Any engine still around is a leak the test reports; it is ours, so stop it by pid.
    if (engineLog && existsSync(engineLog)) {
      for (const line of readFileSync(engineLog, 'utf8').split('\n')) {
        if (!line) continue;
        const { pid } = JSON.parse(line) as EngineLine;
        if (engineAlive(pid)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // Gone.
          }
        }
      }
    }
    if (process.env.FAULT_KEEP) console.log(`kept ${root}`);
    else rmSync(root, { recursive: true, force: true });
  });

  it('stores every valid delivery once, runs each once, in arrival order, across two SIGKILLs', async () => {
    const t0 = Date.now();
    const seed = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const plan = makePlan(seed);
    const valid = plan.filter((d) => !d.bad);
    const bad = plan.filter((d) => d.bad);
    const byId = new Map(plan.map((d) => [d.id, d]));
    const kPerItem = new Map<number, number>();
    for (const d of valid) kPerItem.set(d.item, Math.max(kPerItem.get(d.item) ?? 0, d.n));

    const repoDir = join(root, 'widgets');
    mkdirSync(repoDir);
    engineLog = join(root, 'engine.log');
    writeFileSync(engineLog, '');
    const configPath = join(root, 'config.yaml');
    const port = await freePort();
    writeFileSync(
      configPath,
      stringify({
        dataDir: 'data',
        log: { level: 'info' },
        server: { host: '127.0.0.1', port },
        webhook: { secret: SECRET },
        repos: { [REPO]: { path: repoDir } },
        // pollSeconds: requeued work is also picked up without a new delivery to wake the dispatcher.
        dispatch: { concurrency: CONCURRENCY, pollSeconds: 0.2, closeGraceSeconds: 2 },
        defaults: { engine: 'fault', backstopSeconds: 60, killGraceSeconds: 0.5 },
        engines: {
          fault: {
            binary: FAULT_ENGINE,
            protocol: 'claude-stream-json',
            sessionId: 'assign',
            headless: {
              args: ['-p', '--output-format', 'stream-json'],
              start: ['--session-id', '{sessionId}'],
              resume: ['--resume', '{sessionId}'],
              promptPrefix: ['--'],
            },
            env: { FAULT_ENGINE_LOG: engineLog },
          },
        },
      }),
    );
    const dbPath = join(root, 'data', 'the-loop.db');
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? root,
      LANG: 'C.UTF-8',
      THE_LOOP_CONFIG: configPath,
    };
    supervisor = new Supervisor(root, env, port);
    const sup = supervisor;
    await sup.start();
    const reader = new Database(dbPath, { readonly: true, fileMustExist: true });
    reader.pragma('busy_timeout = 5000');
    const count = (sql: string) => (reader.prepare(sql).get() as { n: number }).n;

    const stats: Stats = { requests: 0, connectionErrors: 0, unavailable: 0, answers: new Map() };
    let firstSendsDone = 0;
    const dupTasks: Promise<Answer>[] = [];

    // Each sender owns its work items, so a work item's deliveries go out in n order from one place,
    // each only after the previous one was answered: arrival order is send order.
    const sender = async (index: number) => {
      for (const d of plan.filter((p) => p.sender === index)) {
        if (d.dup) {
          // The same delivery again, later — sometimes right away, racing the original.
          const delay = Math.random() < 0.3 ? Math.random() * 5 : 5 + Math.random() * 3000;
          dupTasks.push(sleep(delay).then(() => deliver(port, d, stats)));
        }
        await deliver(port, d, stats);
        firstSendsDone += 1;
      }
    };

    // The chaos: two SIGKILLs at random points of the sending, each followed by a restart.
    const inFlightAtKill: number[] = [];
    const killPoints = [
      Math.floor(TOTAL * (0.1 + Math.random() * 0.3)),
      Math.floor(TOTAL * (0.5 + Math.random() * 0.4)),
    ];
    const chaos = async () => {
      for (const point of killPoints) {
        await waitFor(() => firstSendsDone >= point, DELIVERY_DEADLINE_MS, `${point} deliveries sent`);
        await sup.settled();
        await sleep(100 + Math.random() * 400);
        await sup.kill(() =>
          inFlightAtKill.push(count("SELECT COUNT(*) AS n FROM turns WHERE status = 'running'")),
        );
      }
    };

    const chaosDone = chaos();
    await Promise.all(Array.from({ length: SENDERS }, (_, i) => sender(i)));
    await Promise.all(dupTasks);
    await chaosDone;
    const sentAt = Date.now();
    expect(sup.kills).toBe(KILLS);

    // Drain: the daemon works off what it accepted (restarted if it is not running).
    await sup.settled();
    if (sup.current?.exitedAt !== undefined) await sup.restart();
    await waitFor(
      () =>
        count('SELECT COUNT(*) AS n FROM deliveries') >= valid.length &&
        count("SELECT COUNT(*) AS n FROM deliveries WHERE status IN ('queued', 'running')") === 0,
      DRAIN_MS,
      'the inbox to drain',
      250,
    );
    const drainedAt = Date.now();
    const stopped = await sup.stop();
    const lastStdout = sup.current?.stdout ?? '';

    // --- The evidence ---
    const deliveries = reader
      .prepare('SELECT id, seq, status, route, work_item, turn_id, error FROM deliveries ORDER BY seq')
      .all() as {
      id: string;
      seq: number;
      status: string;
      route: string | null;
      work_item: string | null;
      turn_id: number | null;
      error: string | null;
    }[];
    const turns = reader
      .prepare(
        'SELECT id, session_id, seq, status, end_reason, delivery_id, pid, error FROM turns ORDER BY id',
      )
      .all() as {
      id: number;
      session_id: string;
      seq: number;
      status: string;
      end_reason: string | null;
      delivery_id: string | null;
      pid: number | null;
      error: string | null;
    }[];
    const sessions = reader.prepare('SELECT id, work_item FROM sessions').all() as {
      id: string;
      work_item: string;
    }[];
    reader.close();
    const logLines = readFileSync(engineLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as EngineLine);

    const lost = turns.filter((t) => t.end_reason === 'lost');
    const duplicatesSent = plan.filter((d) => d.dup).length;
    const wall = (Date.now() - t0) / 1000;
    console.log(
      `webhook fault: seed ${seed} · ${plan.length} deliveries sent (${valid.length} valid) · ${duplicatesSent} duplicates · ${bad.length} bad signatures · ${stats.requests} requests, ${stats.connectionErrors} connection errors retried, ${stats.unavailable} 503s · ${sup.kills} kills (turns in flight: ${inFlightAtKill.join(', ')}) · ${lost.length} lost turns re-run · ${turns.length} turns, ${logLines.length} engine runs · send ${((sentAt - t0) / 1000).toFixed(1)} s, drain ${((drainedAt - sentAt) / 1000).toFixed(1)} s, wall ${wall.toFixed(1)} s`,
    );

    expect(sup.unexpectedExits).toEqual([]);
    expect(stopped).toEqual({ code: 0, signal: null });
    expect(lastStdout).toContain('Stopped.');

    // Every answer was one of the expected ones.
    const wrongAnswers: string[] = [];
    for (const d of plan) {
      const answers = stats.answers.get(d.id) ?? [];
      expect(answers.length).toBe(d.dup ? 2 : 1);
      for (const a of answers) {
        const ok = d.bad
          ? a.status === 401
          : (a.status === 202 && a.text === 'accepted') || (a.status === 200 && a.text === 'duplicate');
        if (!ok) wrongAnswers.push(`${d.id} (${d.bad ? 'bad' : 'valid'}): ${a.status} ${a.text}`);
      }
    }
    expect(sample(wrongAnswers)).toEqual([]);

    // Every validly signed delivery id is in the inbox exactly once; no bad-signature one is.
    const stored = new Map<string, number>();
    for (const row of deliveries) stored.set(row.id, (stored.get(row.id) ?? 0) + 1);
    expect(sample(valid.filter((d) => stored.get(d.id) !== 1).map((d) => d.id))).toEqual([]);
    expect(sample(bad.filter((d) => stored.has(d.id)).map((d) => d.id))).toEqual([]);
    expect(deliveries.length).toBe(valid.length);

    // Each was routed to its work item and finished.
    expect(
      sample(
        deliveries
          .filter((row) => {
            const d = byId.get(row.id);
            return (
              !d ||
              row.status !== 'done' ||
              (row.route !== 'start' && row.route !== 'deliver') ||
              row.work_item !== `github:${REPO}#${d.item}`
            );
          })
          .map((row) => `${row.id}: ${row.status} ${row.route} ${row.work_item} ${row.error ?? ''}`),
      ),
    ).toEqual([]);

    // Every delivery ran exactly one succeeded turn; the only other turns are ones a kill interrupted.
    const turnsOf = new Map<string, typeof turns>();
    for (const t of turns) {
      const list = turnsOf.get(t.delivery_id ?? '') ?? [];
      list.push(t);
      turnsOf.set(t.delivery_id ?? '', list);
    }
    expect(
      sample(turns.filter((t) => !t.delivery_id || !byId.get(t.delivery_id) || byId.get(t.delivery_id)?.bad)),
    ).toEqual([]);
    const notOnce = valid.filter(
      (d) => (turnsOf.get(d.id) ?? []).filter((t) => t.status === 'succeeded').length !== 1,
    );
    expect(sample(notOnce.map((d) => `${d.id}: ${JSON.stringify(turnsOf.get(d.id) ?? [])}`))).toEqual([]);
    expect(sample(turns.filter((t) => t.status !== 'succeeded' && t.end_reason !== 'lost'))).toEqual([]);
    const succeededOf = new Map(
      turns.filter((t) => t.status === 'succeeded').map((t) => [t.delivery_id as string, t]),
    );
    expect(
      sample(deliveries.filter((row) => row.turn_id !== succeededOf.get(row.id)?.id).map((row) => row.id)),
    ).toEqual([]);
    expect(lost.length).toBeLessThanOrEqual(KILLS * CONCURRENCY);

    // One session per work item; its succeeded turns' order is the deliveries' n order, which is
    // also their arrival order in the inbox.
    expect(sessions.length).toBe(ITEMS);
    const sessionOf = new Map(sessions.map((s) => [s.work_item, s.id]));
    const orderProblems: string[] = [];
    for (let item = 1; item <= ITEMS; item++) {
      const k = kPerItem.get(item) ?? 0;
      const expected = Array.from({ length: k }, (_, i) => i + 1);
      const workItem = `github:${REPO}#${item}`;
      const arrival = deliveries
        .filter((row) => row.work_item === workItem)
        .map((row) => byId.get(row.id)?.n ?? -1);
      if (JSON.stringify(arrival) !== JSON.stringify(expected))
        orderProblems.push(`#${item} arrival order: ${arrival.join(',')}`);
      const session = sessionOf.get(workItem);
      const ran = turns
        .filter((t) => t.status === 'succeeded' && t.session_id === session)
        .sort((a, b) => a.seq - b.seq)
        .map((t) => byId.get(t.delivery_id ?? '')?.n ?? -1);
      if (JSON.stringify(ran) !== JSON.stringify(expected))
        orderProblems.push(`#${item} turn order: ${ran.join(',')}`);
      if (turns.some((t) => t.session_id !== session && byId.get(t.delivery_id ?? '')?.item === item))
        orderProblems.push(`#${item} has turns outside its session`);
      // The engine saw this item's markers in n order; a re-run after a kill may repeat one.
      const seen = logLines
        .filter((l) => l.marker?.startsWith(`${item}:`))
        .map((l) => Number(l.marker?.split(/[: ]/)[1]));
      const collapsed = seen.filter((n, i) => i === 0 || n !== seen[i - 1]);
      if (JSON.stringify(collapsed) !== JSON.stringify(expected))
        orderProblems.push(`#${item} engine order: ${collapsed.join(',')}`);
    }
    expect(sample(orderProblems)).toEqual([]);

    // The engine log agrees with the registry: every run carried a valid delivery's marker (nothing
    // with a bad signature reached an engine), and each succeeded turn is one of those runs.
    const runs = new Map(logLines.map((l) => [l.pid, l]));
    expect(sample(logLines.filter((l) => !l.marker))).toEqual([]);
    expect(
      sample(
        logLines.filter((l) => {
          const [, id] = (l.marker ?? '').split(' ');
          const d = byId.get(id ?? '');
          return !d || d.bad || l.marker !== `${d.item}:${d.n} ${d.id}`;
        }),
      ),
    ).toEqual([]);
    expect(
      sample(
        [...succeededOf.values()].filter((t) => {
          const d = byId.get(t.delivery_id ?? '') as Delivery;
          return t.pid === null || runs.get(t.pid)?.marker !== `${d.item}:${d.n} ${d.id}`;
        }),
      ),
    ).toEqual([]);
    expect(logLines.length).toBeGreaterThanOrEqual(valid.length);
    expect(logLines.length).toBeLessThanOrEqual(valid.length + lost.length);

    // Nothing left behind: no daemon we started, no engine.
    expect(sup.started.filter((p) => p.exitedAt === undefined || pidAlive(p.pid)).map((p) => p.pid)).toEqual(
      [],
    );
    const strays = () => logLines.filter((l) => engineAlive(l.pid)).map((l) => l.pid);
    await waitFor(() => strays().length === 0, 5_000, 'engines to be gone').catch(() => {});
    expect(strays()).toEqual([]);
  }, 300_000);
});
