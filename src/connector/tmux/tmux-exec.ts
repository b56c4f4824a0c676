import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
// The daemon's own minimal tmux environment: no secret of the connector's reaches the tmux server.
import { tmuxEnv } from '../../runners/tmux/tmux.js';

/**
 * The connector's own tmux client: every call is `tmux [-L socket] <argv…>` through spawn with an
 * argv array — never a shell. The few tmux command strings the backend builds (the branches of an
 * `if-shell -F`, a hook) are assembled only from values checked here against strict patterns, so no
 * outside text is ever parsed by tmux's command parser; outside text travels on stdin
 * (`load-buffer -`) or as one argv element of a program tmux starts (`respawn-pane … sh -c <text>`).
 */

const SOCKET = /^[A-Za-z0-9._-]{1,100}$/;
const PANE = /^%\d{1,9}$/;
const IDENTITY = /^\$\d{1,9}@\d{1,12}$/;
const SESSION = /^\$\d{1,9}$/;
const BUFFER = /^the-loop-[0-9a-f]{8,32}$/;
const CHANNEL = /^the-loop-run-[0-9a-f]{8,32}$/;
const OPTION = /^@the_loop_status_[0-9a-f]{8,32}$/;

/** Most bytes read from one tmux call (a capture of a very long history is cut here). */
const MAX_STDOUT = 32 * 1024 * 1024;
const DEFAULT_TIMEOUT_MS = 10_000;

export interface TmuxExecOptions {
  /** `tmux -L <name>`: a private server; undefined: the user's default server. */
  socket?: string | undefined;
  binary?: string | undefined;
}

export interface ExecResult {
  ok: boolean;
  code: number | null;
  stdout: string;
  stderr: string;
  /** The binary could not be started at all (not installed). */
  missing: boolean;
}

function check(pattern: RegExp, what: string, value: string): string {
  if (!pattern.test(value)) throw new Error(`refusing unsafe tmux ${what} ${JSON.stringify(value)}`);
  return value;
}

export const checkPane = (v: string): string => check(PANE, 'pane id', v);
export const checkIdentity = (v: string): string => check(IDENTITY, 'session identity', v);
export const checkSession = (v: string): string => check(SESSION, 'session id', v);
export const checkBuffer = (v: string): string => check(BUFFER, 'buffer name', v);
export const checkChannel = (v: string): string => check(CHANNEL, 'channel name', v);
export const checkOption = (v: string): string => check(OPTION, 'option name', v);

/** A fresh random hex token (buffer, channel and option names; output markers no program can guess). */
export const token = (): string => randomBytes(8).toString('hex');

/** A tmux call started with `start`: its result once it exits, and a way to end it early. */
export interface Started {
  result: Promise<ExecResult>;
  kill(): void;
}

export class TmuxExec {
  readonly socket: string | undefined;
  readonly binary: string;
  private readonly running = new Map<ChildProcess, Promise<ExecResult>>();
  private closed = false;

  constructor(options: TmuxExecOptions = {}) {
    if (options.socket !== undefined) check(SOCKET, 'socket name', options.socket);
    this.socket = options.socket;
    this.binary = options.binary ?? 'tmux';
  }

  private argv(args: readonly string[]): string[] {
    return [...(this.socket ? ['-L', this.socket] : []), ...args];
  }

  /** One tmux call; `input` is written to its stdin (for `load-buffer -`). Never rejects. */
  run(args: readonly string[], options: { input?: string; timeoutMs?: number } = {}): Promise<ExecResult> {
    const call = this.start(args, options.input);
    const timer = setTimeout(call.kill, options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    return call.result.finally(() => clearTimeout(timer));
  }

  /**
   * One tmux call that may take as long as it needs (one that begins with `wait-for`): `kill()` ends
   * it by its own PID, never by name; `killAll()` ends every one still running.
   */
  start(args: readonly string[], input?: string): Started {
    if (this.closed) {
      const stderr = 'the connector is stopping: no new tmux call';
      return {
        result: Promise.resolve({ ok: false, code: null, stdout: '', stderr, missing: false }),
        kill: () => {},
      };
    }
    const child = spawn(this.binary, this.argv(args), { env: tmuxEnv(), stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    let missing = false;
    child.stdout.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_STDOUT) out.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk));
    const result = new Promise<ExecResult>((resolve) => {
      child.on('error', (error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') missing = true;
        err.push(Buffer.from(String(error.message)));
      });
      child.on('close', (code) => {
        this.running.delete(child);
        const stdout = Buffer.concat(out).toString('utf8');
        const stderr = Buffer.concat(err).toString('utf8');
        resolve({ ok: code === 0 && !missing, code, stdout, stderr, missing });
      });
    });
    this.running.set(child, result);
    // A tmux that exits before reading all of stdin (an error) must not crash us with EPIPE.
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
    const kill = () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    };
    return { result, kill };
  }

  /** How many tmux children are running now (for tests: a finished or stopped run leaves none). */
  get waiting(): number {
    return this.running.size;
  }

  /** End every tmux child still running (by its PID) and wait for each to exit; start no more. */
  async killAll(): Promise<void> {
    this.closed = true;
    const pending = [...this.running];
    for (const [child] of pending) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    await Promise.all(pending.map(([, done]) => done));
  }
}

/** tmux's answers that mean the pane (or the whole server) is not there. */
export const GONE = /can't find (pane|window|session)|no server running|error connecting|server exited/i;
