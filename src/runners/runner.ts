import type { EnginePreset } from '../engines/preset.js';
import type { TurnEvent } from '../engines/protocols/types.js';
import type { EndReason } from '../sessions/types.js';

/** One turn for a runner to run. Built by the core; the runner decides how the engine is started. */
export interface RunTurnInput {
  preset: EnginePreset;
  /** The session the turn belongs to (runners that keep per-session state use it). */
  session: { id: string; slug: string; tmuxTarget: string | null };
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
  onEvent: (event: TurnEvent) => void;
  onSpawn?: ((pid: number) => void) | undefined;
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
}

export interface Runner {
  readonly name: string;
  /** Can this runner work here at all (its tools installed)? A clear error if not (invariant 7). */
  check?(): Promise<void>;
  /** Can this runner run this engine? A clear error if not, before any session is registered. */
  supports?(preset: EnginePreset, engine: string): void;
  /** The name of the runner's resource for a new session (e.g. its tmux session), stored with it. */
  targetFor?(slug: string): string;
  runTurn(input: RunTurnInput): Promise<RunOutcome>;
  /** End what the runner keeps for a session (best effort). Returns a note, e.g. "already gone". */
  closeSession?(session: { slug: string; tmuxTarget: string | null }): Promise<string>;
}
