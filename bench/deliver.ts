/**
 * Latency of the tmux runner's delivery, from "delivery dequeued" to "text in the pane", against the
 * floor: the three bare tmux commands run back to back from a shell script, measured side by side in
 * the same run, alternating one delivery each.
 *
 *   npm run bench:deliver      (needs tmux ≥ 3.2; BENCH_DELIVERIES per side, default 200, after BENCH_WARMUP, default 20)
 *
 *   ours    the tmux runner's own `deliver` step (src/runners/tmux/tmux-deliver.ts) on a real `Tmux` client: sanitize, 0600 file,
 *           `display-message` (copy-mode check), `load-buffer -b <unique> <file>`, `paste-buffer -p -d`,
 *           rm the file, sleep submitDelayMs, `send-keys Enter`; no hooks (nothing to confirm against).
 *           submitDelayMs is 0 here: the preset's delay (Claude: 200 ms) is a deliberate wait before
 *           Enter, not part of getting the text into the pane.
 *   floor   the same text written to a 0600 file, then `/bin/sh floor.sh` spawned per delivery, which
 *           runs `tmux load-buffer`, `tmux paste-buffer -p -d`, `tmux send-keys Enter`.
 *
 * Both sides paste the same already-sanitized prompt (the issues.opened fixture rendered with the
 * default issue template, as routing does, plus a unique token line) into the same pane. The pane runs
 * a tiny node program that puts its tty in raw mode, turns bracketed paste on (as a TUI does) and
 * forwards every byte it reads to a unix socket this process listens on, so arrival is an event, not a
 * poll. Per delivery three instants are taken from the moment the delivery starts:
 *   pasted     the whole paste has arrived (the token followed by the bracketed-paste end marker):
 *              "text in the pane", the figure the goal is about;
 *   submitted  the Enter after it has arrived;
 *   returned   the call resolved / the shell script exited.
 * Every delivery is checked byte for byte (`ESC[200~` + text with LF→CR + `ESC[201~` + CR).
 * A private tmux server (`tmux -L the-loop-bench-<random> -f /dev/null`) is used and killed at the end,
 * its socket file removed, the temp dir removed. Other load on the machine skews every figure, so the
 * load average before the run is printed with them.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { sanitizeUntrusted } from '../src/core/text.js';
import { DEFAULT_TEMPLATES, renderPrompt } from '../src/github/prompt.js';
import { nullLogger } from '../src/log/logger.js';
import { Tmux } from '../src/runners/tmux/tmux.js';
import { deliver } from '../src/runners/tmux/tmux-deliver.js';
import type { TmuxRunnerOptions, TurnContext } from '../src/runners/tmux/tmux-session-state.js';

const ROOT = join(import.meta.dirname, '..');
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 200);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 20);
const TIMEOUT_MS = 10_000;
const TARGET = 'loop-bench';
const PASTE_START = '\u001b[200~';
const PASTE_END = '\u001b[201~';

const FLOOR_SCRIPT = `set -e
tmux -L "$1" load-buffer -b "$2" "$3"
tmux -L "$1" paste-buffer -p -d -b "$2" -t "=$4:"
tmux -L "$1" send-keys -t "=$4:" Enter
`;

// Runs in the pane: raw tty, bracketed paste on, every byte read forwarded to the bench's socket.
const PANE_SCRIPT = `import { connect } from 'node:net';
const out = connect(process.argv[2]);
process.stdin.setRawMode(true);
process.stdout.write('\\u001b[?2004h');
process.stdin.pipe(out);
out.on('close', () => process.exit(0));
`;

/** The environment the Tmux client gives tmux (src/runners/tmux/tmux.ts): the floor's shell gets the same. */
function tmuxEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of ['PATH', 'HOME', 'USER', 'LANG', 'LC_ALL', 'TERM', 'TMPDIR', 'TMUX_TMPDIR']) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  return env;
}

/** A prompt as routing renders it for issues.opened, already sanitized, ending with a unique token. */
function basePrompt(): string {
  const payload = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/github/issues.opened.json'), 'utf8'));
  const issue = payload.issue as { number: number; title: string; body: string; html_url: string };
  const workItem = `acme/widgets#${issue.number}`;
  const body = sanitizeUntrusted(issue.body);
  return renderPrompt(DEFAULT_TEMPLATES.issue, {
    kind: 'issue',
    workItem,
    repo: 'acme/widgets',
    number: issue.number,
    title: sanitizeUntrusted(issue.title, 300).replace(/[\n\t]+/g, ' '),
    author: 'octocat',
    url: issue.html_url,
    event: 'opened',
    body,
    head: '',
    base: '',
  });
}

interface Marks {
  pasted: number;
  submitted: number;
}

/** What the pane program forwards; resolves one expected delivery at a time. */
class PaneReader {
  private received = '';
  private waiter:
    | {
        token: string;
        expected: string;
        pasted?: number;
        resolve: (m: Marks) => void;
        reject: (e: Error) => void;
        timer: NodeJS.Timeout;
      }
    | undefined;

  push(chunk: string): void {
    const now = performance.now();
    this.received += chunk;
    const w = this.waiter;
    if (!w) return;
    if (w.pasted === undefined) {
      const at = this.received.indexOf(`${w.token}${PASTE_END}`);
      if (at < 0) return;
      w.pasted = now;
    }
    if (!this.received.endsWith(`${PASTE_END}\r`)) return;
    clearTimeout(w.timer);
    this.waiter = undefined;
    const got = this.received;
    this.received = '';
    if (got !== w.expected) {
      w.reject(
        new Error(
          `the pane received ${JSON.stringify(got.slice(0, 200))}… (${got.length} chars), expected ${JSON.stringify(w.expected.slice(0, 200))}… (${w.expected.length} chars)`,
        ),
      );
      return;
    }
    w.resolve({ pasted: w.pasted, submitted: now });
  }

  /** Stop waiting (the delivery failed): no timer left to hold the process. */
  cancel(): void {
    if (this.waiter) clearTimeout(this.waiter.timer);
    this.waiter = undefined;
  }

  expect(token: string, text: string): Promise<Marks> {
    if (this.received !== '') throw new Error(`stray input in the pane: ${JSON.stringify(this.received)}`);
    const expected = `${PASTE_START}${text.replace(/\n/g, '\r')}${PASTE_END}\r`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        reject(
          new Error(
            `delivery ${token} not seen in the pane within ${TIMEOUT_MS} ms; received ${JSON.stringify(this.received.slice(-200))}`,
          ),
        );
      }, TIMEOUT_MS);
      this.waiter = { token, expected, resolve, reject, timer };
    });
  }
}

interface Sample {
  pasted: number;
  submitted: number;
  returned: number;
}

const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
};

/** The real client, timing each tmux process it runs while `recording` (to show where ours spends its time). */
class TimedTmux extends Tmux {
  recording = false;
  readonly calls = new Map<string, number[]>();

  override async run(args: string[], input?: { timeoutMs?: number }) {
    const start = performance.now();
    const result = await super.run(args, input);
    if (this.recording) {
      // One label per tmux process: the command names of a `a ; b` sequence.
      const what = args.filter((_, i) => i === 0 || args[i - 1] === ';').join(' ; ');
      const list = this.calls.get(what) ?? [];
      list.push(performance.now() - start);
      this.calls.set(what, list);
    }
    return result;
  }
}

/** The part of the runner's per-turn context `deliver` reads (no hooks: nothing to confirm against). */
interface DeliverContext {
  input: { prompt: string };
  target: string;
  dir: string;
  hooks: undefined;
  sessionId: string;
  /** No turn in flight: nothing to save between the paste and Enter. */
  state: { hookOffset: number };
}

async function main(): Promise<void> {
  const loadBefore = loadavg()[0] ?? 0;
  const uid = process.getuid?.() ?? 0;
  const socketName = `the-loop-bench-${randomBytes(4).toString('hex')}`;
  const socketDir = join(process.env.TMUX_TMPDIR || '/tmp', `tmux-${uid}`);
  const socketDirExisted = existsSync(socketDir);
  const socketFile = join(socketDir, socketName);
  const tmp = mkdtempSync(join(tmpdir(), 'the-loop-bench-deliver-'));
  const stateDir = join(tmp, 'session');
  const paneSocket = join(tmp, 'pane.sock');
  const floorScript = join(tmp, 'floor.sh');
  const paneScript = join(tmp, 'pane.mjs');
  writeFileSync(floorScript, FLOOR_SCRIPT, { mode: 0o600 });
  writeFileSync(paneScript, PANE_SCRIPT, { mode: 0o600 });
  mkdirSync(stateDir, { mode: 0o700 });

  const tmux = new TimedTmux({ socket: socketName });
  const env = tmuxEnv();
  const children = new Set<ChildProcess>();
  let server: Server | undefined;
  let pane: Socket | undefined;
  let cleaned = false;
  const cleanup = () => {
    if (cleaned) return;
    cleaned = true;
    for (const c of children) c.kill('SIGKILL');
    pane?.destroy();
    server?.close();
    // Synchronous, so it also runs from a signal handler: kill our private server, then its socket.
    killServer(socketName, env);
    rmSync(socketFile, { force: true });
    if (!socketDirExisted && existsSync(socketDir) && readdirSync(socketDir).length === 0)
      rmdirSync(socketDir);
    rmSync(tmp, { recursive: true, force: true });
  };
  const onSignal = () => {
    cleanup();
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);

  try {
    const version = await tmux.version();
    if (!version) throw new Error('tmux is not installed: the bench needs it');

    // The pane program connects back to us; everything it reads from its tty arrives here.
    const reader = new PaneReader();
    server = createServer();
    const connected = new Promise<Socket>((resolve) => server?.once('connection', resolve));
    await new Promise<void>((resolve, reject) => {
      server?.once('error', reject);
      server?.listen(paneSocket, () => resolve());
    });
    await tmux.must(
      [
        '-f',
        '/dev/null',
        'new-session',
        '-d',
        '-s',
        TARGET,
        '-x',
        '200',
        '-y',
        '50',
        '--',
        process.execPath,
        paneScript,
        paneSocket,
      ],
      'new-session',
    );
    let connectTimer: NodeJS.Timeout | undefined;
    pane = await Promise.race([
      connected,
      new Promise<never>((_, reject) => {
        connectTimer = setTimeout(() => reject(new Error('the pane program did not connect')), TIMEOUT_MS);
      }),
    ]).finally(() => clearTimeout(connectTimer));
    pane.setEncoding('utf8');
    pane.on('data', (chunk: string) => reader.push(chunk));

    // Ours: the tmux runner's own delivery step (tmux-deliver.ts), so the bench follows whatever src does.
    const runnerOptions: TmuxRunnerOptions = {
      tmux,
      stateRoot: tmp,
      hookScript: join(tmp, 'unused-hook.js'),
      launcher: join(tmp, 'unused-launch.js'),
      width: 200,
      height: 50,
      readyMs: TIMEOUT_MS,
      logger: nullLogger,
    };
    let measuring = false;
    const ours = async (text: string) => {
      tmux.recording = measuring;
      try {
        const ctx: DeliverContext = {
          input: { prompt: text },
          target: TARGET,
          dir: stateDir,
          hooks: undefined,
          sessionId: 'bench-session',
          state: { hookOffset: 0 },
        };
        await deliver(runnerOptions, ctx as unknown as TurnContext, 0);
      } finally {
        tmux.recording = false;
      }
    };

    // The floor: write the file, then one shell per delivery running the three tmux commands.
    let floorCount = 0;
    const floor = async (text: string) => {
      const file = join(tmp, `floor-${floorCount++}.txt`);
      writeFileSync(file, text, { mode: 0o600 });
      const buffer = `the-loop-${randomUUID().slice(0, 8)}`;
      try {
        await new Promise<void>((resolve, reject) => {
          const child = spawn('/bin/sh', [floorScript, socketName, buffer, file, TARGET], {
            stdio: ['ignore', 'ignore', 'pipe'],
            env,
          });
          children.add(child);
          let stderr = '';
          child.stderr?.on('data', (d: Buffer) => {
            stderr += d.toString();
          });
          child.on('error', reject);
          child.on('close', (code) => {
            children.delete(child);
            if (code === 0) resolve();
            else reject(new Error(`floor.sh exited ${code}: ${stderr.trim()}`));
          });
        });
      } finally {
        rmSync(file, { force: true });
      }
    };

    const base = basePrompt();
    if (sanitizeUntrusted(base, 1024 * 1024) !== base) throw new Error('the bench prompt must be clean text');
    let promptBytes = 0;
    const one = async (fn: (text: string) => Promise<void>): Promise<Sample> => {
      const token = `bench-${randomBytes(8).toString('hex')}`;
      const text = `${base}\n${token}`;
      promptBytes = Buffer.byteLength(text);
      const seen = reader.expect(token, text);
      const start = performance.now();
      const returned = fn(text).then(() => performance.now());
      const [marks, end] = await Promise.all([seen, returned]).catch((error: unknown) => {
        reader.cancel();
        throw error;
      });
      return { pasted: marks.pasted - start, submitted: marks.submitted - start, returned: end - start };
    };

    // Warm up both paths, then alternate one delivery each, the order swapping every pair.
    for (let i = 0; i < WARMUP; i++) {
      await one(ours);
      await one(floor);
    }
    measuring = true;
    const samples: { ours: Sample[]; floor: Sample[] } = { ours: [], floor: [] };
    for (let i = 0; i < DELIVERIES; i++) {
      if (i % 2 === 0) {
        samples.ours.push(await one(ours));
        samples.floor.push(await one(floor));
      } else {
        samples.floor.push(await one(floor));
        samples.ours.push(await one(ours));
      }
    }
    const leftovers = readdirSync(stateDir);
    if (leftovers.length > 0) throw new Error(`the runner left files behind: ${leftovers.join(', ')}`);
    const buffers = await tmux.must(['list-buffers', '-F', '#{buffer_name}'], 'list-buffers');
    if (buffers.trim() !== '') throw new Error(`tmux buffers left behind: ${buffers.trim()}`);

    // Report.
    type Key = keyof Sample;
    const stats = (xs: Sample[], key: Key) => {
      const values = xs.map((x) => x[key]);
      return { p50: percentile(values, 50), p99: percentile(values, 99) };
    };
    console.log(
      `prompt: issues.opened rendered with the default issue template + token line, ${promptBytes} bytes, ` +
        `${base.split('\n').length + 1} lines; ${DELIVERIES} deliveries per side after ${WARMUP} warm-up, alternating; ` +
        `${version.text}, private server -L ${socketName}; ${cpus().length} CPUs, load average ${loadBefore.toFixed(1)} before the run; node ${process.version}`,
    );
    console.log(
      'ours: the tmux runner deliver step with submitDelayMs = 0 (the preset delay, Claude 200 ms, is a deliberate wait before Enter,',
    );
    console.log(
      '      not part of getting the text into the pane; with it, "submitted" and "returned" grow by that much)',
    );
    console.log(
      'floor: 0600 file + `/bin/sh floor.sh` per delivery (load-buffer; paste-buffer -p -d; send-keys Enter)',
    );
    console.log(
      'latency from the start of the delivery, ms: pasted = whole bracketed paste read in the pane ("text in the pane"),',
    );
    console.log(
      '      submitted = the Enter after it read in the pane, returned = call resolved / script exited',
    );
    const keys: Key[] = ['pasted', 'submitted', 'returned'];
    const line = (name: string, xs: Sample[]) =>
      console.log(
        `${name}  ${keys
          .map((k) => {
            const s = stats(xs, k);
            return `${k} p50 ${s.p50.toFixed(2).padStart(6)}  p99 ${s.p99.toFixed(2).padStart(6)}`;
          })
          .join('   ')}`,
      );
    line('floor  ', samples.floor);
    line('ours   ', samples.ours);
    const ratios = keys
      .map((k) => {
        const o = stats(samples.ours, k);
        const f = stats(samples.floor, k);
        return `${k} p50 ${(o.p50 / f.p50).toFixed(2)}×  p99 ${(o.p99 / f.p99).toFixed(2)}×`;
      })
      .join('   ');
    console.log(`ratio   ours / floor   ${ratios}   (goal: "text in the pane" within 1.5×)`);
    const perDelivery = [...tmux.calls.values()].reduce((n, xs) => n + xs.length, 0) / DELIVERIES;
    const each = [...tmux.calls].map(([what, xs]) => `${what} ${percentile(xs, 50).toFixed(2)}`).join(' · ');
    console.log(
      `where ours spends it: ${perDelivery.toFixed(1)} tmux processes per delivery through Tmux.run (p50 ms each: ${each}); ` +
        'the floor: 1 sh + 3 tmux',
    );
  } finally {
    cleanup();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

function killServer(socketName: string, env: Record<string, string>): void {
  try {
    execFileSync('tmux', ['-L', socketName, 'kill-server'], { stdio: 'ignore', env, timeout: 10_000 });
  } catch {
    // Already gone (or never started): nothing to kill.
  }
}

await main();
