/**
 * The one event vocabulary every engine protocol is parsed into. Parsers are pure: they map one
 * decoded line (or one text chunk) of engine output to zero or more TurnEvents.
 */

/** Token counts by kind. Absent kinds are 0; an absent Usage means "not measured". */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheCreationTokens: number;
  reasoningTokens: number;
  /**
   * Of `cacheCreationTokens`, those written with the 1-hour lifetime (Anthropic bills them at twice
   * the input price, the default 5 minutes at 1.25×), when the source splits them (Claude Code's
   * transcripts, Anthropic's responses). Absent: every cache write was a 5-minute one, or nobody said.
   */
  cacheCreation1hTokens?: number | undefined;
}

export type TurnEvent =
  /** The engine announced its session/thread id (pinned or captured). */
  | { type: 'session'; engineSessionId: string; model?: string | undefined }
  /** Assistant text (a whole block or a delta). */
  | { type: 'text'; text: string }
  /** The engine decided to call a tool. `input` is the tool's structured input, as the engine gave it. */
  | { type: 'tool-use'; id: string; name: string; input: unknown }
  /** A tool call finished. `summary` is a bounded excerpt of its output. */
  | { type: 'tool-result'; id: string; ok: boolean; summary: string }
  /**
   * Usage as the engine reported it. Whether that is the turn's own figures or the session's running
   * total is the preset's `usageScope`, applied by the runner, not the parser.
   */
  | {
      type: 'usage';
      usage: Usage;
      model?: string | undefined;
      costUsd?: number | undefined;
      /** Per-request meters (transcripts): the request's key, so re-reading it never counts it twice. */
      sourceId?: string | undefined;
      /** When the request was made, by the source's clock (transcripts). */
      at?: string | undefined;
      /**
       * A correction (the rest of an output first counted with a placeholder): the request's output
       * count in all. `usage` holds the difference (what the turn adds); the ledger keeps this total.
       */
      outputTotal?: number | undefined;
    }
  /** The engine's own end-of-turn event. */
  | { type: 'turn-end'; ok: boolean; message?: string | undefined; subtype?: string | undefined }
  /** An error the engine reported (API error, tool crash, ...). Does not by itself end the turn. */
  | { type: 'error'; message: string }
  /** A line we could not use (bad JSON, failed schema). Reported, skipped, never fatal. */
  | { type: 'diagnostic'; message: string }
  /**
   * The engine refused a tool call itself (its permission mode needs an approval nobody gave): the
   * turn goes on, and says so in a warning.
   */
  | {
      type: 'tool-refused';
      tool: string;
      id?: string | undefined;
      input?: unknown;
      /** The merge policy's hook refused it (its own record agrees): an act, not a permission refusal. */
      byPolicy?: boolean | undefined;
    }
  /** A TUI waits for a person (its permission prompt is up), or goes on (`waiting: false`). */
  | { type: 'attention'; waiting: boolean; message?: string | undefined };

export type TurnEventType = TurnEvent['type'];

export const emptyUsage = (): Usage => ({
  inputTokens: 0,
  outputTokens: 0,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  reasoningTokens: 0,
});
