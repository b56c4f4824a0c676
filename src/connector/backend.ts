import type { BackendName } from './names.js';

/**
 * The port every terminal backend implements (tmux, kitty). The server resolves an agent's target to
 * one of the terminals a backend lists and hands the backend that `Terminal` — never the agent's
 * string. A backend acts on the terminal's canonical id only, and fails with `ConnectorError` codes
 * (names.ts) for what the agent can correct: `E_TARGET_GONE` when the terminal went away (or its id
 * now names another terminal) between resolution and use, `E_PANE_BUSY`, `E_BACKEND_UNAVAILABLE`,
 * `E_TIMEOUT`. Every process is spawned with an argv array; no argument text reaches a shell or a
 * tmux command string.
 */

/** One terminal as listed: a tmux pane, or a kitty window. Never carries an environment. */
export interface Terminal {
  /** Canonical id: a tmux pane id (`%12`), or `kitty:<window id>`. */
  id: string;
  backend: BackendName;
  /**
   * The name a grant's targets match: the tmux session's name (every pane of a session has it), the
   * kitty window's title.
   */
  name: string;
  /**
   * What a `single` grant binds, so a terminal killed and re-created under the same name is another
   * terminal: tmux `<session id>@<session_created>` (e.g. `$3@1764800000`); kitty
   * `<kitty pid>/<window id>`.
   */
  identity: string;
  /** tmux: `<session>:<window index>.<pane index>`; kitty: `<tab title> / <window id>`. For people. */
  label: string;
  /** The pane's or window's title (set by its program: shown, never trusted). */
  title: string;
  /** The foreground program's name (no arguments, no environment). */
  command: string;
  cols: number;
  rows: number;
  /** The active pane of its window and session (tmux); the focused window (kitty). */
  active: boolean;
  /** Its program exited and the pane is kept (`remain-on-exit`). */
  dead: boolean;
  /** tmux copy mode (or another mode): keys and pastes would go to the mode, not the program. */
  inMode: boolean;
  /** The program is on the alternate screen (a full-screen program: an editor, a pager, a TUI). */
  alternateScreen: boolean;
  /** When its tmux session (or kitty window) was created, ISO 8601; null when unknown. */
  createdAt: string | null;
}

export interface ReadResult {
  /** The lines, oldest first, trailing blank lines dropped, escape sequences stripped. */
  lines: string[];
  /** More lines were available than asked for. */
  truncated: boolean;
  cursor: { x: number; y: number } | null;
}

export interface RunRequest {
  command: string;
  /**
   * `new-pane` (default): a new pane (tmux: a detached window in the target's session) whose death the
   * backend records; `pane`: typed into the target itself, only when it sits at a known shell prompt.
   */
  where: 'new-pane' | 'pane';
  timeoutMs: number;
  /** At most this many lines of output are returned (the last ones). */
  maxLines: number;
  /** Keep the new pane after the command (default: it is closed once its output is read). */
  keep: boolean;
}

export interface RunResult {
  /** The command's exit status; null when it did not exit (timeout) or was killed by a signal. */
  exitStatus: number | null;
  /** The signal that ended it, when one did. */
  signal: number | null;
  timedOut: boolean;
  /** Its output (the pane's text, escape sequences stripped), the last `maxLines` lines. */
  output: string;
  truncated: boolean;
  /** The pane (or kitty window) it ran in: the new one, or the target. */
  ranIn: string;
  /** Whether that new pane is still there (`keep`, or a timeout that could not close it). */
  kept: boolean;
  durationMs: number;
}

/** A key from the fixed grammar (keys.ts), already parsed: modifiers and a base key. */
export interface Key {
  ctrl: boolean;
  meta: boolean;
  shift: boolean;
  /** A named key (`Enter`, `Up`, `F5`…) or one character of `[a-z0-9]`. */
  base: string;
}

export interface ConnectorBackend {
  readonly name: BackendName;
  /** Whether it can be used at all (installed, server running, reachable), and why not. */
  available(): Promise<{ ok: true } | { ok: false; reason: string }>;
  /** Every terminal it can see (the server filters them by the grant). */
  list(): Promise<Terminal[]>;
  /** The last `lines` lines (scrollback included when `history`). */
  read(terminal: Terminal, options: { lines: number; history: boolean }): Promise<ReadResult>;
  /**
   * Text as a bracketed paste (when the program asked for it), escape and control sequences already
   * stripped by the caller (newline and tab kept). Refuses a pane in a mode or dead (E_PANE_BUSY).
   */
  sendText(terminal: Terminal, text: string): Promise<void>;
  /** Keys pressed in order. Refuses a pane in a mode or dead (E_PANE_BUSY). */
  sendKeys(terminal: Terminal, keys: readonly Key[]): Promise<void>;
  /** Run a command and return its real exit status (never by scraping a marker from the screen). */
  run(terminal: Terminal, request: RunRequest, signal?: AbortSignal): Promise<RunResult>;
  /** Close the terminal (tmux: its pane; the session goes with its last pane). */
  close(terminal: Terminal): Promise<void>;
  /** End what it holds (child processes, timers). */
  dispose(): Promise<void>;
}
