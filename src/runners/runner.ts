import type { EnginePreset } from '../engines/preset.js';
import type { TurnEvent } from '../engines/protocols/types.js';
import type { EndReason } from '../sessions/types.js';

/** One turn for a runner to run. Built by the core; the runner decides how the engine is started. */
export interface RunTurnInput {
  preset: EnginePreset;
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
  stoppedBy: 'exit' | 'SIGTERM' | 'SIGKILL' | 'never-started';
}

export interface Runner {
  readonly name: string;
  runTurn(input: RunTurnInput): Promise<RunOutcome>;
}
