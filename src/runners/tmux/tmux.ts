import { execFile } from 'node:child_process';
import { LoopError } from '../../core/errors.js';

/**
 * A thin tmux client: every call is `tmux [-L socket] <args…>` through execFile with an argv array —
 * never a shell, never outside text on the command line (text travels through files and buffers).
 * Targets are validated against a strict pattern before use.
 */

export const TARGET = /^loop-[a-z0-9-]{1,120}$/;
const BUFFER = /^the-loop-[a-z0-9-]{1,80}$/;
const SOCKET = /^[A-Za-z0-9._-]{1,100}$/;

export interface TmuxOptions {
  /** `-L <name>` private server socket; undefined: the user's default server. */
  socket?: string | undefined;
  binary?: string;
  timeoutMs?: number;
}

export interface TmuxResult {
  ok: boolean;
  code: number | null;
  stdout: string;
  stderr: string;
}

export type PaneState =
  | { state: 'gone' }
  /** tmux failed for another reason (timeout, no resources): nothing is known about the session. */
  | { state: 'unknown'; error: string }
  | { state: 'alive' }
  | { state: 'dead'; status: number | null; signal: number | null };

export function checkTarget(target: string): string {
  if (!TARGET.test(target))
    throw new LoopError('internal', `refusing unsafe tmux target ${JSON.stringify(target)}`);
  return target;
}

export function checkBuffer(name: string): string {
  if (!BUFFER.test(name))
    throw new LoopError('internal', `refusing unsafe tmux buffer name ${JSON.stringify(name)}`);
  return name;
}

export class Tmux {
  constructor(private readonly options: TmuxOptions = {}) {
    if (options.socket !== undefined && !SOCKET.test(options.socket)) {
      throw new LoopError('config-invalid', `tmux.socket must match ${SOCKET} (a socket name for tmux -L)`);
    }
  }

  get socket(): string | undefined {
    return this.options.socket;
  }

  /** The argv prefix that selects our server (for `tmux attach` too). */
  baseArgs(): string[] {
    return this.options.socket ? ['-L', this.options.socket] : [];
  }

  run(args: string[], input?: { timeoutMs?: number }): Promise<TmuxResult> {
    return new Promise((resolve) => {
      const child = execFile(
        this.options.binary ?? 'tmux',
        [...this.baseArgs(), ...args],
        {
          timeout: input?.timeoutMs ?? this.options.timeoutMs ?? 10_000,
          maxBuffer: 64 * 1024 * 1024,
          env: tmuxEnv(),
        },
        (error, stdout, stderr) => {
          const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
          resolve({ ok: !error, code, stdout: String(stdout), stderr: String(stderr) });
        },
      );
      child.stdin?.end();
    });
  }

  async must(args: string[], what: string): Promise<string> {
    const r = await this.run(args);
    if (!r.ok) throw new LoopError('internal', `tmux ${what} failed: ${r.stderr.trim() || `exit ${r.code}`}`);
    return r.stdout;
  }

  async version(): Promise<{ major: number; minor: number; text: string } | null> {
    const r = await this.run(['-V']);
    const m = /tmux (?:next-)?(\d+)\.(\d+)/.exec(r.stdout);
    return r.ok && m ? { major: Number(m[1]), minor: Number(m[2]), text: r.stdout.trim() } : null;
  }

  async hasSession(target: string): Promise<boolean> {
    // `=` makes the match exact (no prefix matching of session names).
    return (await this.run(['has-session', '-t', `=${checkTarget(target)}`])).ok;
  }

  /**
   * The session's first pane: gone (no session, or no server at all), alive, or dead (its program
   * exited while `remain-on-exit` kept the pane, with the exit status when tmux knows it).
   */
  async paneState(target: string): Promise<PaneState> {
    const r = await this.run([
      'display-message',
      '-p',
      '-t',
      `=${checkTarget(target)}:`,
      '#{pane_dead} #{pane_dead_status} #{pane_dead_signal}',
    ]);
    if (!r.ok) {
      // Only tmux's own "not there" answers mean gone; a timeout or a failed spawn says nothing.
      const error = r.stderr.trim() || `exit ${r.code}`;
      return /can't find (session|window|pane)|no server running|error connecting|server exited/i.test(error)
        ? { state: 'gone' }
        : { state: 'unknown', error };
    }
    const [dead, status, signal] = r.stdout.trim().split(' ');
    if (dead !== '1') return { state: 'alive' };
    return {
      state: 'dead',
      status: status && /^\d+$/.test(status) ? Number(status) : null,
      signal: signal && /^\d+$/.test(signal) ? Number(signal) : null,
    };
  }

  async listSessions(): Promise<string[]> {
    const r = await this.run(['list-sessions', '-F', '#{session_name}']);
    if (!r.ok) return [];
    return r.stdout.split('\n').filter((name) => TARGET.test(name));
  }

  async killSession(target: string): Promise<boolean> {
    return (await this.run(['kill-session', '-t', `=${checkTarget(target)}`])).ok;
  }

  /** Whether the pane is in a mode (copy mode): keys and pastes would go to the mode, not the program. */
  async paneInMode(target: string): Promise<boolean> {
    const out = await this.must(
      ['display-message', '-p', '-t', `=${checkTarget(target)}:`, '#{pane_in_mode}'],
      'display-message',
    );
    return out.trim() === '1';
  }

  async capturePane(target: string, options: { history?: boolean } = {}): Promise<string> {
    return this.must(
      ['capture-pane', '-p', '-J', ...(options.history ? ['-S', '-'] : []), '-t', `=${checkTarget(target)}:`],
      'capture-pane',
    );
  }
}

/** tmux itself needs little: no secrets from the daemon's environment reach the tmux server. */
export function tmuxEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of ['PATH', 'HOME', 'USER', 'LANG', 'LC_ALL', 'TERM', 'TMPDIR', 'TMUX_TMPDIR']) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  return env;
}
