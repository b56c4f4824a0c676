/**
 * The rig of `npm run bench:console`: a private tmux server (`tmux -L bench-console-<pid>`) with one
 * session whose pane runs a small node program (written into a temp dir, run as an argv), the
 * children started, and their cleanup; plus the figures (percentiles) every part prints.
 *
 * The pane program puts its tty in raw mode and answers each byte typed with `\r<byte>` (the cell at
 * column 0 rewritten: no scrolling, no wrapping, one changed cell per key), and tells the bench when
 * it read it (process.hrtime: CLOCK_MONOTONIC, the same clock in every process), so a key's echo time
 * splits into the way in (client → pane) and the way out (pane → client). It also connects back to
 * the bench over a unix socket and, on `{cmd:'burst', bytes, marker}`, writes base64 of `bytes`
 * random bytes (76-column lines, as base64(1) prints them) and then the marker line to its tty, timing
 * the writes from inside the pane (process.hrtime, synchronous tty writes) and answering
 * `{done, ns}` — so a burst's time is the time tmux took to read it all.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const TARGET = 'loop-bench-console';
export const COLS = 160;
export const ROWS = 48;

const PANE_SCRIPT = `import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
process.stdin.setRawMode(true);
const ctl = connect(process.argv[2]);
process.stdin.on('data', (d) => {
  const ns = process.hrtime.bigint().toString();
  for (const ch of d.toString('latin1')) process.stdout.write('\\r' + ch);
  ctl.write(JSON.stringify({ key: d.toString('latin1'), ns }) + '\\n');
});
let pending = '';
ctl.on('data', (chunk) => {
  pending += chunk.toString();
  let nl;
  while ((nl = pending.indexOf('\\n')) >= 0) {
    const line = pending.slice(0, nl);
    pending = pending.slice(nl + 1);
    const msg = JSON.parse(line);
    if (msg.cmd !== 'burst') continue;
    const b64 = randomBytes(msg.bytes).toString('base64');
    const lines = [];
    for (let i = 0; i < b64.length; i += 76) lines.push(b64.slice(i, i + 76));
    const text = '\\r\\n' + lines.join('\\r\\n') + '\\r\\n';
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < text.length; i += 65536) process.stdout.write(text.slice(i, i + 65536));
    process.stdout.write(msg.marker + '\\r\\n');
    const ns = Number(process.hrtime.bigint() - t0);
    ctl.write(JSON.stringify({ done: msg.marker, ns, bytes: text.length }) + '\\n');
  }
});
ctl.on('close', () => process.exit(0));
`;

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  n: number;
}

export function percentiles(xs: number[]): Percentiles {
  if (xs.some((x) => !Number.isFinite(x))) throw new Error('a sample is not a number');
  const sorted = [...xs].sort((a, b) => a - b);
  const at = (p: number) =>
    sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
  return { p50: at(50), p90: at(90), p99: at(99), n: xs.length };
}

export const median = (xs: number[]): number => percentiles(xs).p50;

export const fmt = (x: number, digits = 2): string => (Number.isFinite(x) ? x.toFixed(digits) : 'n/a');

export function describe(p: Percentiles, unit = 'ms'): string {
  return `p50 ${fmt(p.p50).padStart(7)}  p90 ${fmt(p.p90).padStart(7)}  p99 ${fmt(p.p99).padStart(7)} ${unit}  n ${p.n}`;
}

/** The environment a tmux client gets: never the bench's own TMUX (an attach would refuse to nest). */
export function tmuxEnv(): Record<string, string> {
  const env: Record<string, string> = { TERM: 'xterm-256color' };
  for (const key of ['PATH', 'HOME', 'USER', 'LANG', 'LC_ALL', 'TMPDIR', 'TMUX_TMPDIR']) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  return env;
}

/** Monotonic milliseconds on the clock the pane program reports with (CLOCK_MONOTONIC). */
export const now = (): number => Number(process.hrtime.bigint()) / 1e6;

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Wait for `check` to be true, polling; throws with `what` after `timeoutMs`. */
export async function until(check: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

export interface BurstResult {
  /** Time the pane program took to write the whole burst to its tty, measured inside the pane. */
  ms: number;
  bytes: number;
}

/** The private tmux server, the pane program, the temp dir and every child: one owner, one cleanup. */
export class Rig {
  readonly socketName = `bench-console-${process.pid}`;
  readonly tmp = mkdtempSync(join(tmpdir(), 'the-loop-bench-console-'));
  readonly env = tmuxEnv();
  private readonly children = new Set<ChildProcess>();
  private readonly closers: Array<() => void | Promise<void>> = [];
  private server: Server | undefined;
  private pane: Socket | undefined;
  private paneBuffer = '';
  private readonly bursts = new Map<string, (r: BurstResult) => void>();
  private cleaned = false;
  /** When the pane read each key last (monotonic ms, see now()). */
  readonly arrivals = new Map<string, number>();
  private readonly socketDir = join(process.env.TMUX_TMPDIR || '/tmp', `tmux-${process.getuid?.() ?? 0}`);
  private readonly socketDirExisted = existsSync(this.socketDir);

  tmux(args: string[]): string {
    return execFileSync('tmux', ['-L', this.socketName, ...args], {
      env: this.env,
      encoding: 'utf8',
      timeout: 10_000,
    });
  }

  /** argv of an attach to the bench session (`=` : exact match). */
  attachArgv(extra: string[] = []): string[] {
    return ['tmux', '-L', this.socketName, 'attach-session', ...extra, '-t', `=${TARGET}`];
  }

  async start(): Promise<void> {
    const script = join(this.tmp, 'pane.mjs');
    const control = join(this.tmp, 'pane.sock');
    writeFileSync(script, PANE_SCRIPT, { mode: 0o600 });
    const server = createServer();
    this.server = server;
    const connected = new Promise<Socket>((resolve) => server.once('connection', resolve));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(control, () => resolve());
    });
    this.tmux([
      '-f',
      '/dev/null',
      'new-session',
      '-d',
      '-s',
      TARGET,
      '-x',
      String(COLS),
      '-y',
      String(ROWS),
      '--',
      process.execPath,
      script,
      control,
    ]);
    // As agent windows: the window's size is set, never taken from whoever attaches.
    this.tmux(['set-option', '-g', 'window-size', 'manual']);
    this.tmux(['set-option', '-g', 'history-limit', '2000']);
    this.tmux(['set-option', '-g', 'status', 'off']);
    let timer: NodeJS.Timeout | undefined;
    const pane = await Promise.race([
      connected,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('the pane program did not connect')), 10_000);
      }),
    ]).finally(() => clearTimeout(timer));
    this.pane = pane;
    pane.setEncoding('utf8');
    pane.on('data', (chunk: string) => this.onPane(chunk));
  }

  private onPane(chunk: string): void {
    this.paneBuffer += chunk;
    let nl = this.paneBuffer.indexOf('\n');
    while (nl >= 0) {
      const msg = JSON.parse(this.paneBuffer.slice(0, nl)) as
        | { done: string; ns: number; bytes: number }
        | { key: string; ns: string };
      this.paneBuffer = this.paneBuffer.slice(nl + 1);
      if ('key' in msg) this.arrivals.set(msg.key, Number(BigInt(msg.ns)) / 1e6);
      else {
        this.bursts.get(msg.done)?.({ ms: msg.ns / 1e6, bytes: msg.bytes });
        this.bursts.delete(msg.done);
      }
      nl = this.paneBuffer.indexOf('\n');
    }
  }

  /** Have the pane print base64 of `bytes` random bytes, then `marker`; resolves with the in-pane time. */
  burst(bytes: number, marker: string): Promise<BurstResult> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`burst ${marker} did not finish in 120 s`)), 120_000);
      this.bursts.set(marker, (r) => {
        clearTimeout(timer);
        resolve(r);
      });
      this.pane?.write(`${JSON.stringify({ cmd: 'burst', bytes, marker })}\n`);
    });
  }

  /** Clear the pane's screen and history (between runs). */
  clear(): void {
    this.tmux(['clear-history', '-t', `=${TARGET}:`]);
  }

  spawnChild(argv: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): ChildProcess {
    const [cmd, ...args] = argv;
    if (cmd === undefined) throw new Error('empty argv');
    const child = spawn(cmd, args, {
      env: options.env ?? this.env,
      cwd: options.cwd ?? this.tmp,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.children.add(child);
    child.on('exit', () => this.children.delete(child));
    return child;
  }

  /** Something to close at cleanup (in reverse order of registration). */
  onCleanup(fn: () => void | Promise<void>): void {
    this.closers.push(fn);
  }

  async cleanup(): Promise<void> {
    if (this.cleaned) return;
    this.cleaned = true;
    for (const fn of this.closers.reverse()) {
      try {
        await fn();
      } catch (error) {
        console.error(`cleanup: ${(error as Error).message}`);
      }
    }
    this.cleanupSync();
  }

  /** The synchronous part (also from a signal handler): children by PID, our tmux server, the temp dir. */
  cleanupSync(): void {
    for (const child of this.children) if (child.pid !== undefined) child.kill('SIGKILL');
    this.children.clear();
    this.pane?.destroy();
    this.server?.close();
    try {
      execFileSync('tmux', ['-L', this.socketName, 'kill-server'], { stdio: 'ignore', env: this.env });
    } catch {
      // Already gone.
    }
    rmSync(join(this.socketDir, this.socketName), { force: true });
    if (!this.socketDirExisted && existsSync(this.socketDir) && readdirSync(this.socketDir).length === 0)
      rmdirSync(this.socketDir);
    rmSync(this.tmp, { recursive: true, force: true });
  }
}
