/**
 * The Claude Code transcript meter, on transcripts the real CLI (2.1.197) wrote against the mock
 * Anthropic API (test/fixtures/transcripts/claude/, recorded by record.ts and record-tui.ts beside
 * them; `<name>.reported.json` holds what the mock reported per model request and per turn):
 * - two-turn: headless, second turn via --resume, appended to the same file;
 * - tool-use: headless Bash call whose first response has three content blocks (thinking, text,
 *   tool_use), so three records share one message.id and repeat its usage;
 * - tui-interrupt: the TUI in tmux, three turns, the second interrupted with Escape during a tool call.
 * Then the incremental file reader: byte splits, partial lines, truncation, replacement, bad lines,
 * and a 200 MB file read with bounded memory.
 */
import {
  appendFileSync,
  closeSync,
  mkdtempSync,
  openSync,
  readFileSync,
  renameSync,
  rmSync,
  truncateSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TurnEvent, Usage } from '../../../src/core/events.js';
import {
  mapTranscriptLine,
  mapTranscriptRecord,
  readTranscriptFrom,
  SEEN_MESSAGE_IDS_LIMIT,
  type TranscriptMarker,
  type TranscriptRead,
  type TranscriptRequest,
  type TranscriptState,
} from '../../../src/engines/transcripts/claude-transcript.js';
import type { MockUsage } from '../../fixtures/mock-apis/types.js';
import { prng } from '../../helpers/check.js';

const FIXTURES = fileURLToPath(new URL('../../fixtures/transcripts/claude/', import.meta.url));
const NAMES = ['two-turn', 'tool-use', 'tui-interrupt'] as const;
type Name = (typeof NAMES)[number];

interface Reported {
  sessionId: string;
  reported: MockUsage[];
  requestsPerTurn: number[];
}

const fixture = (name: Name): string => readFileSync(`${FIXTURES}${name}.jsonl`, 'utf8');
const reportedFor = (name: Name): Reported =>
  JSON.parse(readFileSync(`${FIXTURES}${name}.reported.json`, 'utf8')) as Reported;
const linesOf = (text: string): string[] => text.split('\n').filter((l) => l !== '');

const OPTIONS = { maxLineBytes: 8 * 1024 * 1024 };
const fresh = (): TranscriptState => ({ offset: 0, seenMessageIds: [] });

const toMock = (u: Usage): MockUsage => ({
  input: u.inputTokens,
  output: u.outputTokens,
  cacheRead: u.cacheReadTokens,
  cacheCreation: u.cacheCreationTokens,
});
const sumMock = (list: readonly MockUsage[]): MockUsage =>
  list.reduce<MockUsage>(
    (a, u) => ({
      input: a.input + u.input,
      output: a.output + u.output,
      cacheRead: (a.cacheRead ?? 0) + (u.cacheRead ?? 0),
      cacheCreation: (a.cacheCreation ?? 0) + (u.cacheCreation ?? 0),
    }),
    { input: 0, output: 0, cacheRead: 0, cacheCreation: 0 },
  );

interface Collected {
  events: TurnEvent[];
  markers: TranscriptMarker[];
  requests: TranscriptRequest[];
  warnings: string[];
}
const collected = (): Collected => ({ events: [], markers: [], requests: [], warnings: [] });

/** The pure mapper over lines, with the dedupe set threaded through as the reader does. */
function mapLines(lines: readonly string[], seen = new Set<string>()): Collected {
  const out = collected();
  for (const line of lines) {
    const mapped = mapTranscriptLine(line, seen);
    out.events.push(...mapped.events);
    out.markers.push(...mapped.markers);
    if (mapped.request) {
      seen.add(mapped.request.key);
      out.requests.push(mapped.request);
    }
    if (mapped.warning) out.warnings.push(mapped.warning);
  }
  return out;
}

function add(into: Collected, read: TranscriptRead): void {
  into.events.push(...read.events);
  into.markers.push(...read.markers);
  into.requests.push(...read.requests);
  into.warnings.push(...read.warnings);
}

const usageEvents = (events: readonly TurnEvent[]) =>
  events.filter((e): e is Extract<TurnEvent, { type: 'usage' }> => e.type === 'usage');

/** A user record whose content is a string is a prompt: it starts a turn. */
function isPrompt(line: string): boolean {
  const r = JSON.parse(line) as { type?: string; isMeta?: boolean; message?: { content?: unknown } };
  return r.type === 'user' && r.isMeta !== true && typeof r.message?.content === 'string';
}

/**
 * The records in conversation order: lines are not always written in time order (the TUI fixture has
 * turn 1's reply before its prompt), so follow the `parentUuid` chain from the root. Records without
 * a uuid (queue-operation, last-prompt, ...) carry nothing per turn and are left out.
 */
function chainOrder(lines: readonly string[]): string[] {
  const children = new Map<string | null, string[]>();
  const uuidOf = new Map<string, string>();
  for (const line of lines) {
    const r = JSON.parse(line) as { uuid?: string; parentUuid?: string | null };
    if (typeof r.uuid !== 'string') continue;
    uuidOf.set(line, r.uuid);
    const parent = r.parentUuid ?? null;
    children.set(parent, [...(children.get(parent) ?? []), line]);
  }
  const out: string[] = [];
  const visit = (parent: string | null): void => {
    for (const line of children.get(parent) ?? []) {
      out.push(line);
      visit(uuidOf.get(line) ?? '');
    }
  };
  visit(null);
  return out;
}

function splitTurns(lines: readonly string[]): string[][] {
  const turns: string[][] = [];
  for (const line of chainOrder(lines)) {
    if (isPrompt(line) || turns.length === 0) turns.push([]);
    turns.at(-1)?.push(line);
  }
  return turns.filter((t) => t.some(isPrompt));
}

/** Deterministic pseudo-random numbers (mulberry32), so a failing split can be replayed. */
const random = prng;

let dir: string;
let fileCount = 0;
const tempFile = (): string => join(dir, `t${++fileCount}.jsonl`);

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-transcript-test-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

async function readWhole(text: string | Buffer): Promise<{ out: Collected; read: TranscriptRead }> {
  const file = tempFile();
  writeFileSync(file, text);
  const read = await readTranscriptFrom(file, fresh(), OPTIONS);
  const out = collected();
  add(out, read);
  return { out, read };
}

describe('real transcripts: record types', () => {
  it('have the record types and usage fields the mapper relies on', () => {
    const types = new Set<string>();
    for (const name of NAMES) {
      for (const line of linesOf(fixture(name))) {
        const r = JSON.parse(line) as { type: string; subtype?: string };
        types.add(r.type === 'system' ? `system/${r.subtype}` : r.type);
      }
    }
    for (const t of [
      'user',
      'assistant',
      'attachment',
      'queue-operation',
      'last-prompt',
      'system/turn_duration',
    ])
      expect(types).toContain(t);
    // Every record of every fixture maps without a warning, whatever its type.
    for (const name of NAMES) expect(mapLines(linesOf(fixture(name))).warnings).toEqual([]);
  });

  it('repeat one message id on one record per content block, each with the same usage', () => {
    const assistants = linesOf(fixture('tool-use'))
      .map(
        (l) =>
          JSON.parse(l) as { type: string; requestId?: string; message?: { id?: string; usage?: unknown } },
      )
      .filter((r) => r.type === 'assistant');
    expect(assistants).toHaveLength(4);
    const [a, b, c] = assistants;
    expect(new Set([a, b, c].map((r) => r?.message?.id)).size).toBe(1);
    expect(new Set([a, b, c].map((r) => r?.requestId)).size).toBe(1);
    expect(b?.message?.usage).toEqual(a?.message?.usage);
    expect(c?.message?.usage).toEqual(a?.message?.usage);
  });

  it('contain no credential', () => {
    for (const name of NAMES) expect(fixture(name)).not.toMatch(/sk-ant-(?!REDACTED)/);
  });
});

describe('mapper on real transcripts', () => {
  for (const name of NAMES) {
    it(`${name}: one usage per model request, equal to what the mock reported, summed per turn`, () => {
      const { reported, requestsPerTurn, sessionId } = reportedFor(name);
      const lines = linesOf(fixture(name));
      const all = mapLines(lines);
      expect(all.requests.map((r) => toMock(r.usage))).toEqual(reported);
      expect(usageEvents(all.events).map((e) => toMock(e.usage))).toEqual(reported);
      for (const r of all.requests) {
        expect(r.key).toBe(r.messageId);
        expect(r.messageId).toMatch(/^msg_/);
        expect(r.requestId).toMatch(/^req_/);
        expect(r.sessionId).toBe(sessionId);
        expect(r.sidechain).toBe(false);
        expect(r.model).toBeTruthy();
        expect(r.cacheCreation5m).toBe(0); // the mock sends no TTL split; the CLI writes zeros
      }

      // Per turn: each turn's records alone (dedupe state threaded through) sum to its requests.
      const turns = splitTurns(lines);
      expect(turns).toHaveLength(requestsPerTurn.length);
      expect(turns.flat().filter((l) => l.includes('"type":"assistant"'))).toHaveLength(
        lines.filter((l) => l.includes('"type":"assistant"')).length,
      );
      const seen = new Set<string>();
      let first = 0;
      turns.forEach((turn, i) => {
        const n = requestsPerTurn[i] ?? 0;
        const got = mapLines(turn, seen).requests.map((r) => toMock(r.usage));
        expect(sumMock(got)).toEqual(sumMock(reported.slice(first, first + n)));
        first += n;
      });
    });
  }

  it('two-turn: the assistant text of both turns, no markers (headless writes no turn_duration)', () => {
    const out = mapLines(linesOf(fixture('two-turn')));
    expect(out.events.filter((e) => e.type === 'text')).toEqual([
      { type: 'text', text: 'Hello! I will remember pelican.' },
      { type: 'text', text: 'You asked me to remember pelican.' },
    ]);
    expect(out.markers).toEqual([]);
  });

  it('tool-use: text, tool use and tool result in order, usage once for the three-block message', () => {
    const out = mapLines(linesOf(fixture('tool-use')));
    expect(out.events.map((e) => e.type)).toEqual([
      'usage',
      'text',
      'tool-use',
      'tool-result',
      'text',
      'usage',
    ]);
    const use = out.events.find((e) => e.type === 'tool-use');
    const result = out.events.find((e) => e.type === 'tool-result');
    expect(use).toMatchObject({ name: 'Bash', input: { command: 'echo fixture-tool-ok' } });
    expect(result).toEqual({
      type: 'tool-result',
      id: use?.type === 'tool-use' ? use.id : 'missing',
      ok: true,
      summary: 'fixture-tool-ok',
    });
  });

  it('tui-interrupt: turnEnd, interrupt, turnEnd; the interrupted tool call is a failed result', () => {
    const out = mapLines(linesOf(fixture('tui-interrupt')));
    expect(out.markers).toEqual(['turnEnd', 'interrupt', 'turnEnd']);
    const result = out.events.find((e) => e.type === 'tool-result');
    expect(result).toMatchObject({ ok: false });
    expect(out.events.filter((e) => e.type === 'text').map((e) => (e.type === 'text' ? e.text : ''))).toEqual(
      ['Hello from the TUI.', 'Stopped as you asked.'],
    );
  });

  it('is pure: the seen set is read, not changed; a seen key yields no usage', () => {
    const line = linesOf(fixture('two-turn')).find((l) => l.includes('"type":"assistant"')) ?? '';
    const seen = new Set<string>();
    const a = mapTranscriptLine(line, seen);
    const b = mapTranscriptLine(line, seen);
    expect(seen.size).toBe(0);
    expect(b).toEqual(a);
    expect(a.request?.key).toMatch(/^msg_/);
    const again = mapTranscriptLine(line, new Set([a.request?.key ?? '']));
    expect(again.request).toBeUndefined();
    expect(again.events).toEqual([{ type: 'text', text: 'Hello! I will remember pelican.' }]);
  });

  it('maps the shapes the recordings lack: string interrupts, API errors, sidechains, odd usage', () => {
    const seen = new Set<string>();
    const rec = (r: Record<string, unknown>) => mapTranscriptLine(JSON.stringify(r), seen);
    expect(rec({ type: 'user', message: { content: '[Request interrupted by user]' } }).markers).toEqual([
      'interrupt',
    ]);
    expect(rec({ type: 'user', message: { content: 'plain prompt' } })).toMatchObject({
      events: [],
      markers: [],
    });
    // A prompt (which may carry outside text) that only starts like an interrupt is not one.
    for (const content of [
      '[Request interrupted by user] — said a commenter',
      [{ type: 'text', text: '[Request interrupted by user] please stop' }],
    ]) {
      expect(rec({ type: 'user', message: { content } }).markers).toEqual([]);
    }
    expect(
      rec({
        type: 'user',
        message: { content: [{ type: 'text', text: '[Request interrupted by user for tool use]' }] },
      }).markers,
    ).toEqual(['interrupt']);
    const apiError = rec({
      type: 'assistant',
      isApiErrorMessage: true,
      message: {
        id: 'x',
        model: '<synthetic>',
        content: [{ type: 'text', text: 'API Error: 500 boom' }],
        usage: {},
      },
    });
    expect(apiError.events).toEqual([{ type: 'error', message: 'API Error: 500 boom' }]);
    expect(apiError.request).toBeUndefined();
    const side = rec({
      type: 'assistant',
      isSidechain: true,
      requestId: 'req_side',
      message: {
        model: 'm',
        content: [{ type: 'text', text: 'subagent' }],
        usage: { input_tokens: 5, output_tokens: 2 },
      },
    });
    expect(side.events.map((e) => e.type)).toEqual(['usage']);
    expect(side.request).toMatchObject({ key: 'req_side', sidechain: true });
    const odd = rec({
      type: 'assistant',
      uuid: 'u-odd',
      costUSD: 0.25,
      message: {
        content: 'a string body',
        usage: { input_tokens: '7', output_tokens: -3, cache_creation: { ephemeral_1h_input_tokens: 9 } },
      },
    });
    expect(odd.events[0]).toEqual({ type: 'text', text: 'a string body' });
    expect(odd.request).toMatchObject({
      key: 'u-odd',
      usage: { inputTokens: 0, outputTokens: 0 },
      cacheCreation1h: 9,
      costUsd: 0.25,
    });
    const noId = rec({ type: 'assistant', message: { content: [], usage: { input_tokens: 1 } } });
    expect(noId.request).toBeUndefined();
    expect(noId.warning).toMatch(/no message id/);
    expect(rec({ type: 'system', subtype: 'stop_hook_summary' }).markers).toEqual([]);
    expect(mapTranscriptRecord({ type: 'system', subtype: 'turn_duration' }, seen).markers).toEqual([
      'turnEnd',
    ]);
    for (const type of ['queue-operation', 'attachment', 'last-prompt', 'ai-title', 'summary', 'x-new']) {
      expect(rec({ type, message: { content: '[Request interrupted by user]' } })).toMatchObject({
        events: [],
        markers: [],
      });
    }
  });
});

describe('incremental reading', () => {
  for (const name of NAMES) {
    it(`${name}: any byte split gives exactly the events of one full read`, async () => {
      const bytes = Buffer.from(fixture(name), 'utf8');
      const { out: whole, read } = await readWhole(bytes);
      expect(read.warnings).toEqual([]);
      expect(read.state.offset).toBe(bytes.length);
      expect(whole.requests.map((r) => toMock(r.usage))).toEqual(reportedFor(name).reported);

      // Cuts at every line end, just before it, and at random places (inside multi-byte characters too).
      const lineEnds = [...bytes.entries()].filter(([, b]) => b === 0x0a).map(([i]) => i);
      const next = random(bytes.length);
      const randomCuts = Array.from({ length: 150 }, () => Math.floor(next() * bytes.length));
      const plans = [
        lineEnds.flatMap((i) => [i, i + 1]),
        randomCuts,
        Array.from({ length: 40 }, (_, i) => i * 7),
      ];
      for (const cuts of plans) {
        const file = tempFile();
        writeFileSync(file, '');
        let state = fresh();
        const out = collected();
        let prev = 0;
        for (const cut of [...[...new Set(cuts)].sort((a, b) => a - b), bytes.length]) {
          if (cut < prev) continue;
          appendFileSync(file, bytes.subarray(prev, cut));
          prev = cut;
          const r = await readTranscriptFrom(file, state, OPTIONS);
          expect(r.state.offset).toBeLessThanOrEqual(cut);
          add(out, r);
          state = r.state;
        }
        expect(out).toEqual(whole);
        expect(state.offset).toBe(bytes.length);
        // Reading again adds nothing.
        const again = await readTranscriptFrom(file, state, OPTIONS);
        expect([again.events, again.markers, again.warnings]).toEqual([[], [], []]);
      }
    });
  }

  it('leaves a partial last line for the next read', async () => {
    const text = fixture('two-turn');
    const lines = linesOf(text);
    const last = lines.findLastIndex((l) => l.includes('"type":"assistant"'));
    const head = `${lines.slice(0, last).join('\n')}\n`;
    const partial = (lines[last] ?? '').slice(0, 50);
    const file = tempFile();
    writeFileSync(file, head + partial);
    const first = await readTranscriptFrom(file, fresh(), OPTIONS);
    expect(first.state.offset).toBe(Buffer.byteLength(head));
    expect(first.requests).toHaveLength(1);
    expect(first.warnings).toEqual([]);
    appendFileSync(file, text.slice(head.length + partial.length));
    const second = await readTranscriptFrom(file, first.state, OPTIONS);
    expect(second.requests.map((r) => toMock(r.usage))).toEqual([reportedFor('two-turn').reported[1]]);
    expect(second.state.offset).toBe(Buffer.byteLength(text));
  });

  it('re-reads a truncated file from 0 without counting usage twice', async () => {
    const text = fixture('tool-use');
    const file = tempFile();
    writeFileSync(file, text);
    const first = await readTranscriptFrom(file, fresh(), OPTIONS);
    expect(first.requests).toHaveLength(2);
    // Truncated, then rewritten with less than was read: the same inode, a size below the offset.
    truncateSync(file, 0);
    const lines = linesOf(text);
    writeFileSync(file, `${lines.slice(0, 7).join('\n')}\n`);
    const second = await readTranscriptFrom(file, first.state, OPTIONS);
    expect(second.restarted).toBe('truncated');
    expect(second.warnings.join('\n')).toMatch(/truncated/);
    expect(second.requests).toEqual([]);
    expect(usageEvents(second.events)).toEqual([]);
    expect(second.state.offset).toBeLessThan(first.state.offset);
    // It grows back: no restart, still nothing counted twice.
    writeFileSync(file, text);
    const third = await readTranscriptFrom(file, second.state, OPTIONS);
    expect(third.restarted).toBeUndefined();
    expect(third.requests).toEqual([]);
    expect(third.state.offset).toBe(Buffer.byteLength(text));
  });

  it('re-reads a replaced file (new inode) from 0; only new requests count', async () => {
    const file = tempFile();
    writeFileSync(file, fixture('two-turn'));
    const first = await readTranscriptFrom(file, fresh(), OPTIONS);
    const replacement = tempFile();
    // Same content plus the other session's records, written elsewhere and renamed over it.
    writeFileSync(replacement, fixture('two-turn') + fixture('tool-use'));
    renameSync(replacement, file);
    const second = await readTranscriptFrom(file, first.state, OPTIONS);
    expect(second.restarted).toBe('replaced');
    expect(second.requests.map((r) => toMock(r.usage))).toEqual(reportedFor('tool-use').reported);
    expect(second.state.inode).not.toBe(first.state.inode);
  });

  it('reports a missing file and keeps the state', async () => {
    const state = { offset: 12, seenMessageIds: ['msg_a'] };
    const read = await readTranscriptFrom(join(dir, 'absent.jsonl'), state, OPTIONS);
    expect(read.state).toEqual(state);
    expect(read.warnings.join('\n')).toMatch(/ENOENT/);
  });

  it('walks a file in steps with maxReadBytes, with the same result', async () => {
    const text = fixture('tool-use') + fixture('two-turn');
    const { out: whole } = await readWhole(text);
    const file = tempFile();
    writeFileSync(file, text);
    let state = fresh();
    const out = collected();
    let reads = 0;
    for (;;) {
      const r = await readTranscriptFrom(file, state, { ...OPTIONS, maxReadBytes: 1000 });
      add(out, r);
      state = r.state;
      reads += 1;
      if (!r.more) break;
    }
    expect(reads).toBeGreaterThan(5);
    expect(out).toEqual(whole);
  });

  it('a request first written with a placeholder output count ends with the largest one, across reads', async () => {
    // Claude Code writes one record per content block while it streams; an early one can carry a
    // placeholder output count (here 1 instead of 48 on the first of the three copies).
    const lines = linesOf(fixture('tool-use'));
    const first = lines.findIndex((l) => l.includes('"output_tokens":48'));
    lines[first] = (lines[first] ?? '').replace('"output_tokens":48', '"output_tokens":1');
    const usageOfEvents = (events: TurnEvent[]) =>
      events.flatMap((e) => (e.type === 'usage' ? [[e.sourceId, e.usage.outputTokens]] : []));
    const file = tempFile();
    writeFileSync(file, `${lines.slice(0, first + 1).join('\n')}\n`);
    const a = await readTranscriptFrom(file, fresh(), OPTIONS);
    const key = a.requests[0]?.key;
    expect(usageOfEvents(a.events)).toEqual([[key, 1]]);
    expect(a.state.outputs).toEqual({ [key as string]: 1 });
    // The later copies come in the next read: the rest of the output, under the same source id.
    appendFileSync(file, `${lines.slice(first + 1).join('\n')}\n`);
    const b = await readTranscriptFrom(file, JSON.parse(JSON.stringify(a.state)) as TranscriptState, OPTIONS);
    expect(usageOfEvents(b.events)).toEqual([
      [key, 47],
      [b.requests[0]?.key, 14],
    ]);
    // A copy with a smaller count (out of order) changes nothing.
    const whole = await readWhole(`${[...lines.slice(first + 1), lines[first]].join('\n')}\n`);
    expect(usageOfEvents(whole.out.events).map(([, n]) => n)).toEqual([48, 14]);
  });

  it('caps the remembered message ids, keeping the newest', async () => {
    const n = SEEN_MESSAGE_IDS_LIMIT + 2_000;
    const lines = Array.from({ length: n }, (_, i) =>
      JSON.stringify({
        type: 'assistant',
        message: { id: `msg_${i}`, content: [], usage: { output_tokens: 1 } },
      }),
    );
    const { read } = await readWhole(`${lines.join('\n')}\n`);
    expect(read.requests).toHaveLength(n);
    expect(read.state.seenMessageIds).toHaveLength(SEEN_MESSAGE_IDS_LIMIT);
    expect(read.state.seenMessageIds.at(-1)).toBe(`msg_${n - 1}`);
    expect(read.state.seenMessageIds[0]).toBe(`msg_${n - SEEN_MESSAGE_IDS_LIMIT}`);
  });
});

describe('bad input', () => {
  const reported = [...reportedFor('two-turn').reported, ...reportedFor('tool-use').reported];
  const good = [...linesOf(fixture('two-turn')), ...linesOf(fixture('tool-use'))];

  it('broken JSON, non-objects, bad schemas and unknown types: warnings with positions, correct totals', async () => {
    const junk = [
      '{"type":"assistant","message":{"id":"msg_cut","usage":{"input_tokens":9',
      'not json at all',
      '[1,2,3]',
      '{"type":5}',
      '{"type":"assistant","message":"a string"}',
      '{"type":"user","message":{"content":[{"no":"type"}]}}',
      '{"type":"some-future-record","message":{"usage":{"input_tokens":1000}}}',
      '\u0000\u0001\u00ff binary',
      '',
      '   ',
    ];
    const mixed = good.flatMap((line, i) => (i % 3 === 0 ? [junk[i % junk.length] ?? '', line] : [line]));
    const { out, read } = await readWhole(`${[...junk, ...mixed].join('\r\n')}\r\n`);
    expect(out.requests.map((r) => toMock(r.usage))).toEqual(reported);
    // Seven junk kinds warn (unknown types and blank lines do not), each with a byte offset.
    expect(read.warnings.length).toBeGreaterThanOrEqual(7);
    for (const w of read.warnings) expect(w).toMatch(/: byte \d+: /);
    expect(read.warnings.join('\n')).toMatch(/not JSON/);
    expect(read.warnings.join('\n')).toMatch(/bad "assistant" record: message/);
    expect(read.warnings.join('\n')).not.toContain('msg_cut');
  });

  it('out-of-order lines: the same usage and the same events, in another order', async () => {
    const next = random(7);
    const shuffled = [...good].sort(() => next() - 0.5);
    const { out } = await readWhole(`${shuffled.join('\n')}\n`);
    const { out: ordered } = await readWhole(`${good.join('\n')}\n`);
    const key = (e: unknown) => JSON.stringify(e);
    expect(sumMock(out.requests.map((r) => toMock(r.usage)))).toEqual(sumMock(reported));
    expect(out.requests).toHaveLength(reported.length);
    expect(out.events.map(key).sort()).toEqual(ordered.events.map(key).sort());
  });

  it('duplicated records: skipped with a warning, usage counted once', async () => {
    const doubled = good.flatMap((line) => (line.includes('"uuid"') ? [line, line] : [line]));
    const { out, read } = await readWhole(`${doubled.join('\n')}\n`);
    const { out: once } = await readWhole(`${good.join('\n')}\n`);
    expect(out.events).toEqual(once.events);
    expect(out.requests.map((r) => toMock(r.usage))).toEqual(reported);
    expect(read.warnings.some((w) => /duplicate of record/.test(w))).toBe(true);
  });

  it('a 20 MB line is skipped and reported, and the lines around it are read', async () => {
    const huge = JSON.stringify({
      type: 'assistant',
      message: { id: 'msg_huge', content: [{ type: 'text', text: 'x'.repeat(20 * 1024 * 1024) }], usage: {} },
    });
    const text = `${good.slice(0, 8).join('\n')}\n${huge}\n${good.slice(8).join('\n')}\n`;
    const file = tempFile();
    // Written in 3 MB appends, read after each one: the growing line is never buffered whole.
    const bytes = Buffer.from(text);
    writeFileSync(file, '');
    let state = fresh();
    const out = collected();
    for (let at = 0; at < bytes.length; at += 3 * 1024 * 1024) {
      appendFileSync(file, bytes.subarray(at, at + 3 * 1024 * 1024));
      const r = await readTranscriptFrom(file, state, OPTIONS);
      add(out, r);
      state = r.state;
    }
    expect(out.requests.map((r) => toMock(r.usage))).toEqual(reported);
    expect(out.requests.map((r) => r.key)).not.toContain('msg_huge');
    expect(out.warnings).toHaveLength(1);
    expect(out.warnings[0]).toMatch(/line of \d{8} bytes is over the 8388608-byte limit; skipped/);
    expect(state.offset).toBe(bytes.length);
  });

  it('a file of garbage gives a bounded list of warnings', async () => {
    const { read } = await readWhole(
      `${Array.from({ length: 5_000 }, (_, i) => `garbage ${i}`).join('\n')}\n`,
    );
    expect(read.warnings.length).toBeLessThanOrEqual(101);
    expect(read.warnings.at(-1)).toMatch(/4900 more warnings not shown/);
  });
});

describe('a 200 MB transcript', () => {
  it('is read with bounded memory and the right totals', async () => {
    // A realistic mix from the real tool-use transcript: per turn a prompt, an attachment, a
    // three-block assistant message (usage repeated), a tool result with 48 KB of output, a
    // snapshot, and a closing assistant message.
    const templates = linesOf(fixture('tool-use')).map((l) => JSON.parse(l) as Record<string, unknown>);
    const byType = (type: string) => templates.filter((t) => t.type === type);
    const prompt = byType('user')[0];
    const toolResult = byType('user')[1];
    const attachment = byType('attachment')[0];
    const assistants = byType('assistant');
    if (!prompt || !toolResult || !attachment || assistants.length !== 4) throw new Error('fixture changed');
    const output = `${'0123456789abcdef'.repeat(3 * 1024)}`;

    const file = tempFile();
    const fd = openSync(file, 'w');
    const target = 200 * 1024 * 1024;
    let written = 0;
    let turns = 0;
    while (written < target) {
      const t = turns++;
      const records = [
        { ...prompt, uuid: `p-${t}` },
        { ...attachment, uuid: `a-${t}` },
        ...assistants.map((a, i) => ({
          ...a,
          uuid: `m-${t}-${i}`,
          requestId: `req_${t}_${i === 3 ? 2 : 1}`,
          message: { ...(a.message as object), id: `msg_${t}_${i === 3 ? 2 : 1}` },
        })),
        {
          ...toolResult,
          uuid: `r-${t}`,
          toolUseResult: { stdout: output, stderr: '' },
          message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: output }] },
        },
        { type: 'file-history-snapshot', messageId: `p-${t}`, snapshot: { trackedFileBackups: {} } },
      ];
      const chunk = `${records.map((r) => JSON.stringify(r)).join('\n')}\n`;
      writeSync(fd, chunk);
      written += Buffer.byteLength(chunk);
    }
    closeSync(fd);
    const [u1, u2] = reportedFor('tool-use').reported;
    if (!u1 || !u2) throw new Error('fixture changed');

    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 5);
    let state = fresh();
    let requests = 0;
    let total = 0;
    let toolResults = 0;
    let warnings = 0;
    try {
      // One read of the whole file; events are consumed as a caller would and then dropped.
      const read = await readTranscriptFrom(file, state, OPTIONS);
      peak = Math.max(peak, process.memoryUsage().rss);
      state = read.state;
      requests = read.requests.length;
      total = read.requests.reduce((sum, r) => sum + r.usage.outputTokens, 0);
      toolResults = read.events.filter((e) => e.type === 'tool-result').length;
      warnings = read.warnings.length;
    } finally {
      clearInterval(sampler);
    }
    expect(warnings).toBe(0);
    expect(state.offset).toBe(written);
    expect(requests).toBe(turns * 2);
    expect(total).toBe(turns * (u1.output + u2.output));
    expect(toolResults).toBe(turns);
    // The file is 200 MB; the reader holds a chunk, a line and the (bounded) events at a time.
    const growth = peak - before;
    expect(growth).toBeLessThan(80 * 1024 * 1024);
  });
});

describe('secrets in transcripts', () => {
  it('are scrubbed from each whole line before a tool result is summarised and cut', async () => {
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { readTranscriptFrom } = await import('../../../src/engines/transcripts/claude-transcript.js');
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-transcript-secret-'));
    try {
      const key = 'sk-ant-transcript-canary-0123456789';
      const record = {
        type: 'user',
        uuid: 'u1',
        message: {
          role: 'user',
          content: [{ type: 'tool_result', tool_use_id: 't1', content: `${'x'.repeat(1990)}KEY=${key}` }],
        },
      };
      const file = join(dir, 't.jsonl');
      writeFileSync(file, `${JSON.stringify(record)}\n`);
      const read = await readTranscriptFrom(
        file,
        { offset: 0, seenMessageIds: [] },
        {
          maxLineBytes: 1024 * 1024,
          scrub: (line) => line.split(key).join('[secret]'),
        },
      );
      const text = JSON.stringify(read.events);
      expect(text).toContain('KEY=[sec');
      expect(text).not.toContain(key.slice(0, 12));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
