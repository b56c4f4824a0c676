import type { TurnEvent } from '../../core/events.js';
import type { EndReason } from '../../core/ports/sessions.js';
import { LineReader } from '../../engines/protocols/line-reader.js';
import type { Protocol } from '../../engines/protocols/protocol.js';
import type { RunTurnInput } from '../runner.js';
import type { OutputSinks } from './engine-process.js';

/** How much of stderr (on a PTY: of the merged output) we keep to explain a failure. */
const STDERR_TAIL_BYTES = 8 * 1024;

/** How a turn ended, decided once: the first writer wins. */
export interface Ending {
  reason: EndReason;
  at: Date;
  ok: boolean;
  error: string | null;
}

/**
 * One turn's output: the engine's lines parsed into the turn's events (scrubbed first), the tail of
 * its diagnostics kept to explain a failure, and the turn's end — the result event, or whichever
 * other ending (exit, backstop, cancel, spawn error) settles it first.
 */
export class TurnOutput {
  ended: Ending | undefined;
  /** Resolves on the engine's first result (turn-end) event. */
  readonly resultSeen: Promise<void>;
  readonly sinks: OutputSinks;
  private onResult: () => void = () => {};
  private turnEnd: Extract<TurnEvent, { type: 'turn-end' }> | undefined;
  private stderrTail = '';
  private readonly scrub: (text: string) => string;

  constructor(
    private readonly input: RunTurnInput,
    protocol: Protocol,
  ) {
    this.resultSeen = new Promise<void>((resolve) => {
      this.onResult = resolve;
    });
    const parser = protocol.create();
    // Secrets are scrubbed from each whole line before anything parses, cuts or summarises it (a
    // key split by a truncation or a chunk boundary would escape the scrubber).
    const scrub = input.scrub ?? ((text: string) => text);
    this.scrub = scrub;
    const reader = new LineReader({
      maxLineBytes: input.maxLineBytes,
      onLine: (line) =>
        this.emit(parser.push(protocol.framing === 'jsonl' ? scrub(line) : `${scrub(line)}\n`)),
      onOversized: (bytes) =>
        this.emit([
          {
            type: 'diagnostic',
            message: `skipped an output line of ${bytes} bytes (limit ${input.maxLineBytes})`,
          },
        ]),
    });
    this.sinks = {
      onOutput: (chunk) => reader.push(chunk),
      onOutputEnd: () => {
        reader.end();
        this.emit(parser.end());
      },
      onDiagnosticText: (text) => {
        // Twice the tail is kept, scrubbed whole, then cut (see tail()): no secret is split at the cut.
        this.stderrTail = (this.stderrTail + text).slice(-2 * STDERR_TAIL_BYTES);
      },
    };
  }

  settle(reason: EndReason, ok: boolean, error: string | null): void {
    this.ended ??= { reason, at: new Date(), ok, error };
  }

  /** Events of the turn, to the caller; the first turn-end event settles the turn. */
  emit(events: TurnEvent[]): void {
    for (const event of events) {
      if (event.type === 'turn-end' && !this.turnEnd) {
        this.turnEnd = event;
        this.settle(
          'result',
          event.ok,
          event.ok ? null : (event.message ?? 'the engine reported a failed turn'),
        );
        this.onResult();
      }
      try {
        this.input.onEvent(event);
      } catch {
        // A failing observer must not break the turn or escape from a stream callback.
      }
    }
  }

  /** The end of the diagnostics, scrubbed whole before it is cut. */
  tail(): string {
    return this.scrub(this.stderrTail).slice(-STDERR_TAIL_BYTES).trim();
  }
}
