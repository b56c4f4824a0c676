/**
 * Claude Code transcript files (`$CLAUDE_CONFIG_DIR/projects/<cwd, "/" → "-">/<session-id>.jsonl`)
 * read incrementally as TurnEvents: the meter for sessions whose stdout we do not read (the TUI in
 * tmux) and for `the-loop usage scan`. `readTranscriptFrom` is the I/O edge: it reads a file from
 * where the last read stopped, drops duplicated records and usage already counted, and corrects
 * placeholder output counts. Turning one record into events and usage, with the transcript's quirks,
 * is `claude-transcript-records.ts` (re-exported here).
 */

import { emptyUsage, type TurnEvent } from '../../core/events.js';
import {
  mapTranscriptLine,
  type TranscriptMarker,
  type TranscriptRequest,
} from './claude-transcript-records.js';
import { readCompleteLines } from './jsonl-file.js';

export {
  type MappedRecord,
  mapTranscriptLine,
  mapTranscriptRecord,
  type TranscriptMarker,
  type TranscriptRecord,
  type TranscriptRequest,
} from './claude-transcript-records.js';

/** Where a previous read stopped, and which requests it counted. Plain data: store it as JSON. */
export interface TranscriptState {
  offset: number;
  size?: number | undefined;
  inode?: number | undefined;
  /** Keys of the requests already counted, oldest first, at most `SEEN_MESSAGE_IDS_LIMIT`. */
  seenMessageIds: string[];
  /** The output count counted so far for the most recent requests (a later copy may raise it). */
  outputs?: Record<string, number> | undefined;
}

export interface ReadTranscriptOptions {
  /** Lines longer than this are skipped and reported (real lines holding images reach a few MB). */
  maxLineBytes: number;
  /** Stop after about this many bytes; `more` says when to read again. Unbounded when absent. */
  maxReadBytes?: number | undefined;
  /** Removes known secret values from each whole line before it is parsed, cut or summarised. */
  scrub?: ((line: string) => string) | undefined;
}

export interface TranscriptRead {
  events: TurnEvent[];
  markers: TranscriptMarker[];
  /** The requests counted by this read (one per `usage` event, in the same order), with their ids. */
  requests: TranscriptRequest[];
  state: TranscriptState;
  warnings: string[];
  /** The file was truncated or replaced, so it was read again from byte 0. */
  restarted?: 'truncated' | 'replaced' | undefined;
  /** Stopped at `maxReadBytes` with more to read. */
  more: boolean;
}

/** Enough ids to cover any overlap a re-read can produce, small enough to store with the session. */
export const SEEN_MESSAGE_IDS_LIMIT = 10_000;
/** Requests whose output count is remembered across reads (see `TranscriptState.outputs`). */
const OUTPUTS_LIMIT = 256;
/** A file of garbage must not become a list of millions of warnings. */
const WARNING_LIMIT = 100;
/** Record uuids remembered within one read, to drop duplicated records; bounded for huge files. */
const RECORD_UUID_LIMIT = 100_000;

/**
 * Read the complete lines after `state.offset` and map them. Usage already counted (`seenMessageIds`)
 * is not counted again, so a re-read after truncation or replacement adds no usage; the other events
 * of a re-read (text, tools, markers) are replayed, and `restarted` says so.
 */
export async function readTranscriptFrom(
  path: string,
  state: TranscriptState,
  options: ReadTranscriptOptions,
): Promise<TranscriptRead> {
  const seen = new Set(state.seenMessageIds);
  const outputs = new Map(Object.entries(state.outputs ?? {}));
  const events: TurnEvent[] = [];
  const markers: TranscriptMarker[] = [];
  const requests: TranscriptRequest[] = [];
  const warnings: string[] = [];
  let dropped = 0;
  const warn = (message: string): void => {
    if (warnings.length < WARNING_LIMIT) warnings.push(message);
    else dropped += 1;
  };
  const uuids = new Set<string>();

  const read = await readCompleteLines(path, state, {
    maxLineBytes: options.maxLineBytes,
    maxReadBytes: options.maxReadBytes,
    onLine(line, at) {
      const mapped = mapTranscriptLine(options.scrub ? options.scrub(line) : line, seen);
      if (mapped.uuid !== undefined) {
        // The same record twice (a copied or replayed line): the first one counts.
        if (uuids.has(mapped.uuid)) {
          warn(`${path}: byte ${at}: duplicate of record ${mapped.uuid}; skipped`);
          return;
        }
        if (uuids.size >= RECORD_UUID_LIMIT) uuids.clear();
        uuids.add(mapped.uuid);
      }
      if (mapped.warning !== undefined) warn(`${path}: byte ${at}: ${mapped.warning}`);
      if (mapped.request) {
        seen.add(mapped.request.key);
        requests.push(mapped.request);
        outputs.set(mapped.request.key, mapped.request.usage.outputTokens);
      }
      events.push(...mapped.events);
      const copy = mapped.copy;
      const counted = copy ? outputs.get(copy.key) : undefined;
      if (copy && counted !== undefined && copy.outputTokens > counted) {
        // The rest of the output of a request counted with a placeholder: the difference, under the
        // same source id (the ledger adds a request's events up into one row).
        outputs.set(copy.key, copy.outputTokens);
        events.push({
          type: 'usage',
          usage: { ...emptyUsage(), outputTokens: copy.outputTokens - counted },
          model: copy.model,
          sourceId: copy.key,
          at: copy.at,
          outputTotal: copy.outputTokens,
        });
      }
      markers.push(...mapped.markers);
    },
    onOversized(bytes, at) {
      warn(
        `${path}: byte ${at}: line of ${bytes} bytes is over the ${options.maxLineBytes}-byte limit; skipped`,
      );
    },
  });

  if (!read.ok) {
    warn(read.message);
    return { events, markers, requests, state, warnings, more: false };
  }
  if (read.restarted) {
    warn(`${path}: file ${read.restarted}; read again from the start (usage already counted is skipped)`);
  }
  if (dropped > 0) warnings.push(`${path}: ${dropped} more warnings not shown`);
  const ids = [...seen];
  // Placeholders are corrected within a message's own copies, written together: the last few
  // hundred requests are enough to remember.
  const recent = [...outputs].slice(-OUTPUTS_LIMIT);
  return {
    events,
    markers,
    requests,
    state: {
      ...read.cursor,
      seenMessageIds: ids.length > SEEN_MESSAGE_IDS_LIMIT ? ids.slice(-SEEN_MESSAGE_IDS_LIMIT) : ids,
      outputs: Object.fromEntries(recent),
    },
    warnings,
    restarted: read.restarted,
    more: read.more,
  };
}
