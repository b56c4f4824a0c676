import { existsSync } from 'node:fs';
import type { TurnEvent } from '../../core/events.js';
import type { TranscriptMarker } from '../../engines/transcripts/claude-transcript.js';
import { sleep, type TmuxRunnerOptions, type TurnContext } from './tmux-session-state.js';

/**
 * Read what the transcript has beyond the saved position; events go to the turn. Claude Code
 * creates the file with the first prompt: until the turn's end, a missing file is not reported.
 */
export async function readTranscriptOnce(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  final = false,
): Promise<TranscriptMarker[]> {
  const position = ctx.state.transcript;
  if (!position || ctx.input.preset.interactive?.transcript !== 'claude-jsonl') return [];
  if (!final && !existsSync(position.path)) return [];
  // Loaded on the first read (its record schemas load zod): `the-loop run` on another runner, and a
  // turn until its engine has started, never load it.
  const { readTranscriptFrom } = await import('../../engines/transcripts/claude-transcript.js');
  const read = await readTranscriptFrom(position.path, position.state, {
    maxLineBytes: ctx.input.maxLineBytes,
    scrub: ctx.input.scrub,
  });
  for (const warning of read.warnings) {
    if (ctx.warned.has(warning)) continue;
    ctx.warned.add(warning);
    options.logger.warn('transcript', { warning });
  }
  for (const event of read.events) ctx.input.onEvent(event as TurnEvent);
  // The hook may have named another file meanwhile; only our position advances.
  if (ctx.state.transcript === position) position.state = read.state;
  if (read.markers.includes('turnEnd')) ctx.turnEnded = true;
  return read.markers;
}

/**
 * Read the turn's last records. Claude Code fires Stop before the TUI has always written the turn's
 * last records (observed with 2.1.197), so reading goes on until the TUI's end-of-turn record
 * (`turn_duration`) arrives, or a short grace period ends.
 */
export async function readTranscriptToEnd(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  graceMs: number,
): Promise<void> {
  const deadline = Date.now() + graceMs;
  for (;;) {
    const last = Date.now() >= deadline;
    await readTranscriptOnce(options, ctx, last);
    if (ctx.turnEnded || last) return;
    await sleep(50);
  }
}
