import { LoopError } from '../../core/errors.js';
import { checkTarget, type Tmux } from '../../runners/tmux/tmux.js';

/**
 * One viewer's tmux client on a pseudo-terminal: `tmux attach-session -r -f ignore-size,read-only
 * -t =<target>`. Read-only is not what keeps a viewer from typing (nothing is ever written to this
 * pty: a read-only tmux client can still run key bindings such as `C-b )`, which switches sessions);
 * it is a second lock. `ignore-size` keeps the client's size out of the window's size.
 */

/** The part of node-pty's terminal the hub uses (node-pty 1.1.0, lib/terminal.js). */
export interface ViewerPty {
  readonly pid: number;
  onData(listener: (data: Buffer | string) => void): { dispose(): void };
  onExit(listener: (exit: { exitCode: number; signal?: number }) => void): { dispose(): void };
  /** Stop reading the master: the tmux client's writes then block (see flow-rules.ts). */
  pause(): void;
  resume(): void;
  resize(cols: number, rows: number): void;
  kill(signal?: string): void;
}

type Spawn = (
  file: string,
  args: string[],
  options: {
    name: string;
    cols: number;
    rows: number;
    cwd: string;
    env: Record<string, string>;
    encoding: null;
  },
) => ViewerPty;

let loading: Promise<Spawn> | undefined;

/**
 * node-pty's JavaScript terminal (a native addon: imported only when a terminal is opened, so a machine
 * where it failed to build loses the browser terminal alone, with a clear error). Unlike an engine's
 * PTY (runners/process/pty-process.ts), a viewer needs no byte after its client exits.
 */
export function loadPtySpawn(): Promise<Spawn> {
  loading ??= import('node-pty')
    .then((mod) => {
      const api = ((mod as { default?: unknown }).default ?? mod) as { spawn?: unknown };
      if (typeof api.spawn !== 'function') throw new Error('its spawn is missing');
      return api.spawn as Spawn;
    })
    .catch((cause: unknown) => {
      loading = undefined;
      throw new LoopError(
        'binary-missing',
        `node-pty cannot be loaded, so the console cannot show terminals: ${cause instanceof Error ? cause.message : String(cause)}`,
        { cause, hint: 'Rebuild it with `npm rebuild node-pty` (needs python3, make and a C++ compiler).' },
      );
    });
  return loading;
}

/**
 * The tmux client's environment: what it needs to find the server and draw, nothing of the daemon's
 * (its environment holds secrets). `-u` makes tmux draw UTF-8 whatever the locale says.
 */
export function viewerEnv(source: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = { TERM: 'xterm-256color' };
  for (const key of ['PATH', 'LANG', 'TMUX_TMPDIR']) {
    const value = source[key];
    if (value !== undefined) env[key] = value;
  }
  return env;
}

/** The argv of a viewer's client on our tmux server. */
export function viewerArgs(tmux: Tmux, target: string): string[] {
  return [
    ...tmux.baseArgs(),
    '-u',
    'attach-session',
    '-r',
    '-f',
    'ignore-size,read-only',
    '-t',
    `=${checkTarget(target)}`,
  ];
}

export async function spawnViewerPty(
  tmux: Tmux,
  target: string,
  size: { cols: number; rows: number },
): Promise<ViewerPty> {
  const spawn = await loadPtySpawn();
  return spawn('tmux', viewerArgs(tmux, target), {
    name: 'xterm-256color',
    cols: size.cols,
    rows: size.rows,
    cwd: '/',
    env: viewerEnv(process.env),
    // Raw bytes: output goes to the browser as it came, split UTF-8 sequences included.
    encoding: null,
  });
}
