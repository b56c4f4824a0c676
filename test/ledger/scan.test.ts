import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { priceTable } from '../../src/ledger/pricing.js';
import { scanTranscripts } from '../../src/ledger/scan.js';
import { recordOf, scanFile } from '../../src/ledger/scan-file.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { usageReport } from '../../src/store/sqlite/ledger-report.js';
import { SqliteScanCursors } from '../../src/store/sqlite/scan-files.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';

let dir: string;
let db: Db;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-scan-'));
  mkdirSync(join(dir, 'projects', '-repo'), { recursive: true });
  db = openDb(join(dir, 'data', 'the-loop.db'));
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

let n = 0;
/** An assistant record as Claude Code writes it (one per content block; usage repeated). */
function assistant(
  o: {
    id?: string;
    req?: string;
    input?: number;
    output?: number;
    text?: string;
    at?: string;
    session?: string;
  } = {},
): string {
  n += 1;
  return JSON.stringify({
    parentUuid: null,
    isSidechain: false,
    message: {
      id: o.id ?? `msg_${n}`,
      type: 'message',
      role: 'assistant',
      model: 'claude-sonnet-4-5-20250929',
      content: [{ type: 'text', text: o.text ?? 'hello' }],
      usage: {
        input_tokens: o.input ?? 10,
        cache_creation_input_tokens: 2,
        cache_read_input_tokens: 3,
        output_tokens: o.output ?? 5,
        cache_creation: { ephemeral_5m_input_tokens: 2, ephemeral_1h_input_tokens: 0 },
      },
    },
    requestId: o.req ?? `req_${n}`,
    type: 'assistant',
    uuid: `u-${n}`,
    timestamp: o.at ?? '2026-11-20T10:00:00.000Z',
    sessionId: o.session ?? 'sess-1',
  });
}
const user = (text: string) =>
  JSON.stringify({
    type: 'user',
    message: { role: 'user', content: text },
    uuid: `u-${++n}`,
    timestamp: '2026-11-20T10:00:00.000Z',
  });

const file = (name = 'a.jsonl') => join(dir, 'projects', '-repo', name);
const ledger = () => new Ledger(new SqliteLedgerStore(db), priceTable());
/** What a scan reads and writes, on the test's database. */
const deps = () => ({
  ledger: ledger(),
  cursors: new SqliteScanCursors(db),
  sessions: new SqliteSessionStore(db, { scrub: (t: string) => t }),
});
const total = () =>
  usageReport(db, { since: new Date('2020-01-01'), until: new Date('2030-01-01'), by: 'day' }).total;

describe('recordOf (one candidate line)', () => {
  it('reads the fields the ledger needs and nothing else', () => {
    const r = recordOf(Buffer.from(assistant({ id: 'msg_x', input: 7, output: 9, session: 's-9' })));
    expect(r).toEqual([
      'msg_x',
      's-9',
      '2026-11-20T10:00:00.000Z',
      'claude-sonnet-4-5-20250929',
      7,
      9,
      3,
      2,
      0,
    ]);
  });

  it('takes the message usage, not a "usage" key inside the content (a tool input)', () => {
    const line = JSON.stringify({
      message: {
        id: 'msg_t',
        model: 'm',
        content: [{ type: 'tool_use', input: { usage: { input_tokens: 999999 } } }],
        usage: { input_tokens: 1, output_tokens: 2 },
      },
      type: 'assistant',
      timestamp: '2026-11-20T10:00:00Z',
    });
    expect(recordOf(Buffer.from(line))).toEqual([
      'msg_t',
      '',
      '2026-11-20T10:00:00.000Z',
      'm',
      1,
      2,
      0,
      0,
      0,
    ]);
  });

  it('ignores quoted look-alikes inside strings, and reports unusable candidates', () => {
    // The look-alikes are escaped inside the JSON string: the record's own usage (10 in) is read.
    const quoted = recordOf(
      Buffer.from(assistant({ text: 'say "usage":{"input_tokens":999} and "type":"assistant"' })),
    );
    expect(Array.isArray(quoted) ? quoted.slice(4) : quoted).toEqual([10, 5, 3, 2, 0]);
    const broken = assistant().replace('"output_tokens":5', '"output_tokens":-5');
    expect(recordOf(Buffer.from(broken))).toBe('a token count is not a non-negative whole number');
    const noId = JSON.stringify({
      type: 'assistant',
      message: { usage: { input_tokens: 1 } },
      timestamp: '2026-11-20T10:00:00Z',
    });
    expect(recordOf(Buffer.from(noId))).toBe('no message or request id');
    const unclosed = '{"type":"assistant","message":{"id":"msg_1","usage":{"input_tokens":1,';
    expect(recordOf(Buffer.from(unclosed))).toBe('usage object not closed');
    const badTime = assistant({ at: 'yesterday' });
    expect(recordOf(Buffer.from(badTime))).toBe('no usable timestamp');
  });
});

describe('scanFile', () => {
  it('reads complete lines only, keeps the offset before a partial last line, and resumes from it', async () => {
    const a = assistant();
    const b = assistant();
    writeFileSync(file(), `${user('hi')}\n${a}\n${b.slice(0, 40)}`);
    const first = scanFile(file(), { offset: 0 });
    expect(first.records).toHaveLength(1);
    expect(first.offset).toBe(Buffer.byteLength(`${user('hi')}\n${a}\n`));
    appendFileSync(file(), `${b.slice(40)}\n`);
    const second = scanFile(file(), { offset: first.offset, inode: first.inode });
    expect(second.records.map((r) => r[0])).toEqual([JSON.parse(b).message.id]);
    expect(second.offset).toBe(readFileSync(file()).length);
  });

  it('reads again from byte 0 a file that shrank or was replaced', async () => {
    writeFileSync(file(), `${assistant()}\n${assistant()}\n`);
    const first = scanFile(file(), { offset: 0 });
    truncateSync(file(), 10);
    appendFileSync(file(), `\n${assistant()}\n`);
    const shrunk = scanFile(file(), { offset: first.offset, inode: first.inode });
    expect(shrunk.restarted).toBe('truncated');
    writeFileSync(file('b.jsonl'), `${assistant()}\n`);
    renameSync(file('b.jsonl'), file());
    const replaced = scanFile(file(), { offset: 5, inode: first.inode });
    expect(replaced.restarted).toBe('replaced');
    expect(replaced.records).toHaveLength(1);
  });

  it('finds records across chunk boundaries and in lines longer than a chunk, in order', async () => {
    const big = 'x'.repeat(9 * 1024 * 1024);
    const lines = [
      assistant({ id: 'msg_1' }),
      user(big),
      assistant({ id: 'msg_2', text: big }),
      assistant({ id: 'msg_3' }),
    ];
    writeFileSync(file(), `${lines.join('\n')}\n`);
    const scan = scanFile(file(), { offset: 0 });
    expect(scan.records.map((r) => r[0])).toEqual(['msg_1', 'msg_2', 'msg_3']);
    expect(scan.offset).toBe(readFileSync(file()).length);
  });

  it('reads records whose type is written first (another key order) the general way', () => {
    const lines = [
      '{"type":"assistant","message":{"id":"msg_first","model":"claude-sonnet-4-5","usage":{"input_tokens":3,"output_tokens":4}},"sessionId":"s1","timestamp":"2026-11-20T10:00:00Z"}',
      '{"type":"user","message":{"role":"user","content":"hi"},"timestamp":"2026-11-20T10:00:01Z"}',
    ];
    writeFileSync(file(), `${lines.join('\n')}\n`);
    const scan = scanFile(file(), { offset: 0 });
    expect(scan.records.map((r) => [r[0], r[4], r[5]])).toEqual([['msg_first', 3, 4]]);
  });

  it('skips garbage, unknown record types and broken lines with a count and a few reasons', async () => {
    const lines = [
      'not json at all',
      '{"type":"brand-new-type","payload":{"usage":{}}}',
      // In Claude Code's key order (the type after the message).
      '{"message":{"id":"msg_bad","usage":{"input_tokens":"many"}},"type":"assistant","timestamp":"2026-11-20T10:00:00Z"}',
      '\u0000\u0001binary',
      assistant({ id: 'msg_ok' }),
    ];
    writeFileSync(file(), `${lines.join('\n')}\n`);
    const scan = scanFile(file(), { offset: 0 });
    expect(scan.records.map((r) => r[0])).toEqual(['msg_ok']);
    expect(scan.skipped).toBe(1);
    expect(scan.warnings[0]).toMatch(/byte \d+: a token count is not a non-negative whole number/);
  });
});

describe('scanTranscripts (into the ledger)', () => {
  it('counts each request once: per-block duplicates, re-scans, and replaced files add nothing', async () => {
    const a = assistant({ id: 'msg_a', req: 'req_a', input: 100, output: 10 });
    // One message, three content blocks: three records with the same ids and usage.
    writeFileSync(
      file(),
      `${user('go')}\n${a}\n${a.replace('hello', 'more')}\n${a.replace('hello', 'end')}\n`,
    );
    writeFileSync(file('b.jsonl'), `${assistant({ id: 'msg_b', input: 50, output: 5 })}\n`);
    const first = await scanTranscripts(deps(), [join(dir, 'projects')]);
    // On an empty ledger: the message's other blocks are copies within the scan, nothing was there.
    expect(first).toMatchObject({ files: 2, filesRead: 2, records: 4, added: 2, copies: 2, duplicates: 0 });
    expect(total().usage).toMatchObject({
      inputTokens: 150,
      outputTokens: 15,
      cacheReadTokens: 6,
      cacheCreationTokens: 4,
    });

    const again = await scanTranscripts(deps(), [join(dir, 'projects')]);
    expect(again).toMatchObject({ filesRead: 0, records: 0, added: 0 });

    // Only the new bytes are read.
    appendFileSync(file('b.jsonl'), `${assistant({ id: 'msg_c', input: 1, output: 1 })}\n`);
    const incremental = await scanTranscripts(deps(), [join(dir, 'projects')]);
    expect(incremental).toMatchObject({ filesRead: 1, records: 1, added: 1 });
    expect(incremental.bytesRead).toBeLessThan(1000);

    // A file rewritten (same records): read again from the start, nothing counted twice.
    writeFileSync(file('c.jsonl'), readFileSync(file()));
    renameSync(file('c.jsonl'), file());
    const rewritten = await scanTranscripts(deps(), [join(dir, 'projects')]);
    expect(rewritten).toMatchObject({ records: 3, added: 0, copies: 2, duplicates: 1 });
    expect(total().usage.inputTokens).toBe(151);
    expect(total().rows).toBe(3);
  });

  it('keeps the largest output count of a message written while it streamed (1 → 1 → 260)', async () => {
    const a = assistant({ id: 'msg_s', req: 'req_s', input: 100, output: 1 });
    const b = assistant({ id: 'msg_t', req: 'req_t', input: 5, output: 1 });
    const final = a.replace('"output_tokens":1', '"output_tokens":260');
    writeFileSync(file(), `${a}\n${a.replace('hello', 'more')}\n${final}\n`);
    // The other message's final copy is in another file (read after: it must still win).
    writeFileSync(file('b.jsonl'), `${b}\n`);
    writeFileSync(file('c.jsonl'), `${b.replace('"output_tokens":1', '"output_tokens":40')}\n`);
    await scanTranscripts(deps(), [join(dir, 'projects')]);
    expect(total().usage).toMatchObject({ inputTokens: 105, outputTokens: 300 });
    // A copy that arrives in a later scan corrects the row too (never lowers it).
    appendFileSync(file('b.jsonl'), `${b.replace('"output_tokens":1', '"output_tokens":41')}\n`);
    await scanTranscripts(deps(), [join(dir, 'projects')]);
    expect(total().usage).toMatchObject({ inputTokens: 105, outputTokens: 301 });
    expect(total().rows).toBe(2);
  });

  it('does not add again a session this installation meters per turn, and attributes its own tmux sessions', async () => {
    db.prepare(
      `INSERT INTO sessions (id, work_item, slug, engine, runner, engine_session_id, engine_session_started, cwd, status, created_at, updated_at, credential_kind, payer_id)
       VALUES ('s-proc', 'github:o/r#1', 'github-o-r-1', 'claude', 'process', 'claude-proc', 1, '/', 'active', 'a', 'a', 'api-key', 'key:aaaaaaaaaaaa'),
              ('s-tmux', 'github:o/r#2', 'github-o-r-2', 'claude', 'tmux', 'claude-tmux', 1, '/', 'active', 'a', 'a', 'api-key', 'key:bbbbbbbbbbbb')`,
    ).run();
    db.prepare(
      `INSERT INTO turns (session_id, seq, prompt_digest, prompt_bytes, status, started_at, meter) VALUES
         ('s-proc', 1, 'd', 1, 'succeeded', 'a', 'stream-json'), ('s-tmux', 1, 'd', 1, 'succeeded', 'a', 'transcript')`,
    ).run();
    const metered = assistant({ id: 'msg_metered', session: 'claude-proc' });
    writeFileSync(
      file('b.jsonl'),
      `${metered}\n${assistant({ session: 'claude-tmux' })}\n${assistant({ session: 'elsewhere' })}\n`,
    );
    // A fork of the metered session (its history copied under another id), read first: still skipped.
    writeFileSync(file('a.jsonl'), `${metered.replace('"sessionId":"claude-proc"', '"sessionId":"fork"')}\n`);
    // Claude Code's own notices are not requests.
    writeFileSync(
      file('c.jsonl'),
      `${assistant({ session: 'elsewhere' }).replace('claude-sonnet-4-5-20250929', '<synthetic>')}\n`,
    );
    const summary = await scanTranscripts(deps(), [join(dir, 'projects')]);
    // The fork's copy and the metered one are one message: metered once, the other a duplicate.
    expect(summary).toMatchObject({ records: 4, added: 2, alreadyMetered: 1, copies: 1, duplicates: 0 });
    const rows = db
      .prepare('SELECT session_id, work_item, payer_kind, payer_id FROM usage_ledger ORDER BY id')
      .all();
    expect(rows).toEqual([
      {
        session_id: 's-tmux',
        work_item: 'github:o/r#2',
        payer_kind: 'api-key',
        payer_id: 'key:bbbbbbbbbbbb',
      },
      { session_id: null, work_item: null, payer_kind: 'unknown', payer_id: null },
    ]);
  });

  it('with worker threads and results in pieces: the same rows and counts as one thread', async () => {
    // Worker threads run the built scan-worker.js: the built module is used (npm test builds first).
    const built = '../../dist/ledger/scan.js';
    const { scanTranscripts: scanBuilt } = (await import(built)) as typeof import('../../src/ledger/scan.js');
    db.prepare(
      `INSERT INTO sessions (id, work_item, slug, engine, runner, engine_session_id, engine_session_started, cwd, status, created_at, updated_at, credential_kind, payer_id)
       VALUES ('s-proc', 'github:o/r#1', 'github-o-r-1', 'claude', 'process', 'claude-proc', 1, '/', 'active', 'a', 'a', 'api-key', 'key:aaaaaaaaaaaa')`,
    ).run();
    db.prepare(
      `INSERT INTO turns (session_id, seq, prompt_digest, prompt_bytes, status, started_at, meter) VALUES
         ('s-proc', 1, 'd', 1, 'succeeded', 'a', 'stream-json')`,
    ).run();
    const metered = assistant({ id: 'msg_metered', session: 'claude-proc' });
    const streamed = assistant({ id: 'msg_streamed', output: 1, text: 'x'.repeat(3000) });
    // Sizes decide which thread reads which file: copies of one request land in different threads
    // and pieces — a fork's copy of a metered request, and a placeholder output corrected elsewhere.
    const files: Record<string, string[]> = {
      // The largest file: this thread's first piece, inserted before the others are read.
      'd.jsonl': [
        assistant({ text: 'z'.repeat(8000) }),
        streamed.replace('"output_tokens":1', '"output_tokens":50'),
        metered.replace('"sessionId":"claude-proc"', '"sessionId":"fork"'),
      ],
      'a.jsonl': [streamed],
      'b.jsonl': [metered, assistant({ text: 'y'.repeat(5000) })],
      'c.jsonl': [streamed.replace('"output_tokens":1', '"output_tokens":99'), assistant()],
      'e.jsonl': [assistant(), assistant(), user('hi')],
    };
    for (const [name, lines] of Object.entries(files)) writeFileSync(file(name), `${lines.join('\n')}\n`);
    const rowsNow = () =>
      db.prepare('SELECT source_id, output_tokens, session_id FROM usage_ledger ORDER BY source_id').all();
    const counts = (x: Awaited<ReturnType<typeof scanTranscripts>>) => ({
      records: x.records,
      added: x.added,
      alreadyMetered: x.alreadyMetered,
      copies: x.copies,
      duplicates: x.duplicates,
    });
    const one = await scanTranscripts(deps(), [join(dir, 'projects')], {
      workers: 1,
      threadThresholdBytes: 0,
    });
    const oneRows = rowsNow();
    expect(oneRows).toContainEqual({ source_id: 'msg_streamed', output_tokens: 99, session_id: null });
    expect(oneRows.map((r) => (r as { source_id: string }).source_id)).not.toContain('msg_metered');
    for (const pieceBytes of [1, 4000, 1 << 20]) {
      db.exec('DELETE FROM usage_ledger; DELETE FROM scan_files');
      const many = await scanBuilt(deps(), [join(dir, 'projects')], {
        workers: 2,
        threadThresholdBytes: 0,
        pieceBytes,
      });
      expect(many.workers).toBe(2);
      expect(counts(many)).toEqual(counts(one));
      expect(rowsNow()).toEqual(oneRows);
    }
  });

  it('a directory named like a transcript is passed over, not an error', async () => {
    writeFileSync(file(), `${assistant()}\n`);
    mkdirSync(file('dir.jsonl'));
    const summary = await scanTranscripts(deps(), [join(dir, 'projects')]);
    expect(summary.added).toBe(1);
  });
});
