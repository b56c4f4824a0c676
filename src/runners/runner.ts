import type { TurnEvent } from '../core/events.js';
import type { RunnerMode } from '../core/ports/runners.js';
import type { EndReason } from '../core/ports/sessions.js';
import type { EnginePreset } from '../engines/preset.js';
import type { SentKey } from './keys.js';

/** One turn for a runner to run. Built by the core; the runner decides how the engine is started. */
export interface RunTurnInput {
  preset: EnginePreset;
  /** The session the turn belongs to (runners that keep per-session state use it). */
  session: { id: string; slug: string; tmuxTarget: string | null };
  /** The registry's id of this turn (runners that keep per-turn state for adoption record it). */
  turnId?: number | undefined;
  /** Pinned id (assign engines) or the id to resume; undefined on the first turn of a capture engine. */
  engineSessionId: string | undefined;
  first: boolean;
  prompt: string;
  cwd: string;
  env: Record<string, string>;
  backstopMs: number;
  killGraceMs: number;
  maxLineBytes: number;
  signal?: AbortSignal | undefined;
  /** Removes known secret values from engine output, applied to whole lines before parsing. */
  scrub?: ((text: string) => string) | undefined;
  /**
   * The merge policy's pre-tool hook (Claude Code PreToolUse command), for runners that register
   * hooks themselves (the tmux runner's settings file); the process runner gets it through argv.
   */
  preToolHook?: { command: string; matcher: string } | undefined;
  /**
   * The sandbox: the command the engine is run under (`bwrap …`, its last argument `--`), the
   * engine's binary and argv appended. `terminal`: the engine keeps a controlling terminal (a PTY
   * or a tmux pane). Undefined: the engine runs as it is.
   */
  sandbox?: ((options: { terminal: boolean }) => { file: string; args: string[] }) | undefined;
  /** What guards the engine, as a key: a TUI started under another is not reused (tmux runner). */
  launchKey?: string | undefined;
  onEvent: (event: TurnEvent) => void;
  onSpawn?: ((pid: number) => void) | undefined;
  /** adoptTurn: called once the runner has taken the turn over, before it replays the turn's events. */
  onAdopt?: (() => void) | undefined;
}

export interface RunOutcome {
  ok: boolean;
  endReason: EndReason;
  /** When the turn ended: the result event, or the exit / timeout / cancel that ended it. */
  endedAt: Date;
  exitCode: number | null;
  exitSignal: string | null;
  /** Why it failed, in the engine's words where it gave some. Already bounded in size. */
  error: string | null;
  /** How the process finally went away (for the logs): it exited, or we had to signal it. */
  stoppedBy: 'exit' | 'SIGTERM' | 'SIGKILL' | 'never-started' | 'still-running';
  /**
   * The runner let go of a turn that is still running (the daemon is stopping): the turn stays
   * `running` and its delivery in flight, for the next daemon to adopt. Nothing is recorded.
   */
  detached?: boolean | undefined;
  /** The session ended with this turn: its engine ended it, or its runner's resource vanished. */
  sessionGone?: SessionGone | undefined;
}

export interface SessionGone {
  status: 'lost' | 'ended';
  reason: string;
}

/** What a runner can say about a session's resource (its tmux session) right now. */
export type SessionProbe = { alive: true } | ({ alive: false } & SessionGone);

/** Abort reason the dispatcher uses when it stops: runners that can detach do, instead of cancelling. */
export const SHUTDOWN = 'the-loop:shutdown';

/**
 * What every runner does: run one turn of an engine, in the mode it declares (plain data the turn
 * is planned from). Anything else a runner can do is a capability of its own, below, that the runner
 * declares (`implements Runner, Adopting, …`) and callers ask for (`isAdopting(runner)`), never
 * inferring it from the runner's name.
 */
export interface Runner {
  readonly name: string;
  /** How it runs an engine: one headless process per turn, or the engine's TUI for the session. */
  readonly mode: RunnerMode;
  runTurn(input: RunTurnInput): Promise<RunOutcome>;
}

/** A runner that needs tools of its own (tmux), checked before each turn and when the daemon starts. */
export interface Checking {
  /** Can this runner work here at all (its tools installed)? A clear error if not (invariant 7). */
  check(): Promise<void>;
}

/** A runner that runs some engines only. */
export interface Selective {
  /** Can this runner run this engine? A clear error if not, before any session is registered. */
  supports(preset: EnginePreset, engine: string): void;
}

/** A runner that keeps a resource for each session (its tmux session), named when the session starts. */
export interface SessionHolding {
  /** The name of the runner's resource for a new session (e.g. its tmux session), stored with it. */
  targetFor(slug: string): string;
  /** End what the runner keeps for a session (best effort). Returns a note, e.g. "already gone". */
  closeSession(session: { slug: string; tmuxTarget: string | null }): Promise<string>;
}

/** A runner whose turns outlive the process that started them, so a later one can take them over. */
export interface Adopting {
  /**
   * Take over a turn an earlier process started and did not finish (its owner died, the engine ran
   * on): follow it to its end from what the runner saved. `adopted: false` when it cannot (then the
   * turn is lost and its delivery runs again).
   */
  adoptTurn(
    input: RunTurnInput & { turnId: number },
  ): Promise<RunOutcome | { adopted: false; reason: string }>;
}

/** A runner that can tell whether a session's resource is still there. */
export interface Probing {
  /** Is the session's resource still there? Sessions whose resource vanished are marked lost/ended. */
  probe(session: {
    slug: string;
    tmuxTarget: string | null;
    engineSessionId?: string | null;
  }): Promise<SessionProbe>;
}

/** A runner whose engines have a terminal people can press keys in. */
export interface Keyed {
  /**
   * Press keys in the engine's terminal of a session (named keys like `Escape`, other words typed as
   * text). A session whose engine has no terminal to type into is a clear error (invariant 7).
   */
  sendKeys(
    session: { workItem: string; slug: string; tmuxTarget: string | null },
    preset: EnginePreset | undefined,
    keys: readonly string[],
  ): Promise<{ target: string; sent: SentKey[] }>;
}

/** A runner whose sessions people can join in their own terminal. */
export interface Attachable {
  /**
   * The command that joins the session's terminal (run with this terminal's stdio). A session whose
   * resource is gone is a clear error.
   */
  attachCommand(
    session: { tmuxTarget: string; status: string },
    options: { readOnly?: boolean | undefined },
  ): Promise<{ file: string; args: string[] }>;
}

const has = (runner: Runner, method: string) =>
  typeof (runner as unknown as Record<string, unknown>)[method] === 'function';

export const isChecking = (runner: Runner): runner is Runner & Checking => has(runner, 'check');
export const isSelective = (runner: Runner): runner is Runner & Selective => has(runner, 'supports');
export const isSessionHolding = (runner: Runner): runner is Runner & SessionHolding =>
  has(runner, 'targetFor') && has(runner, 'closeSession');
export const isAdopting = (runner: Runner): runner is Runner & Adopting => has(runner, 'adoptTurn');
export const isProbing = (runner: Runner): runner is Runner & Probing => has(runner, 'probe');
export const isKeyed = (runner: Runner): runner is Runner & Keyed => has(runner, 'sendKeys');
export const isAttachable = (runner: Runner): runner is Runner & Attachable => has(runner, 'attachCommand');

/** The names of the runners whose turns a later process can adopt (their engines outlive us). */
export function adoptingRunners(runners: Readonly<Record<string, Runner>>): string[] {
  return Object.entries(runners)
    .filter(([, runner]) => isAdopting(runner))
    .map(([name]) => name);
}
