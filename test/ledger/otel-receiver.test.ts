import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { mergeEngine } from '../../src/config/load.js';
import type { EngineOverride } from '../../src/config/schema.js';
import type { SessionRecord, TurnRecord } from '../../src/core/ports/sessions.js';
import type { EnginePreset } from '../../src/engines/preset.js';
import { BUILTIN_PRESETS } from '../../src/engines/presets.js';
import { Ledger, NO_TELEMETRY_YET } from '../../src/ledger/ledger.js';
import { TelemetryReceiver } from '../../src/ledger/otel-receiver.js';
import { priceTable } from '../../src/ledger/pricing.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { type HttpServer, startHttpServer } from '../../src/web/server.js';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'otlp');
const LOGS = readFileSync(join(FIXTURES, 'claude-2.1.197.logs.json'), 'utf8');
const METRICS = readFileSync(join(FIXTURES, 'claude-2.1.197.metrics.json'), 'utf8');
/** The engine session id in the fixtures. */
const ENGINE_SESSION = '11111111-2222-3333-4444-555555555555';
const FIXTURE_AT = '2026-12-02T23:40:20.980Z';
const FIXTURE_COST = 0.00196875;
const PAYER_ID = 'key:0123456789ab';

type Signal = 'logs' | 'metrics';

const preset = (signal: Signal, enabled = true): EnginePreset =>
  mergeEngine('claude', BUILTIN_PRESETS.claude, { otel: { enabled, signal } } as EngineOverride);

// ---- the harness: a data dir, a real SQLite registry, the receiver behind a real HTTP server ----

interface Harness {
  dir: string;
  db: Db;
  store: SqliteSessionStore;
  ledger: Ledger;
  receiver: TelemetryReceiver;
  server: HttpServer;
  logLines: string[];
  secrets: string[];
  /** What the session store stamps on new turns. */
  clock: { now: Date };
  session: SessionRecord;
  turn: TurnRecord;
  token: string;
}

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const tempDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-otel-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};

let sessionCount = 0;
function newSession(
  store: SqliteSessionStore,
  engineSessionId: string | null,
  extra: { engine?: string } = {},
): Promise<SessionRecord> {
  sessionCount += 1;
  return store.create({
    workItem: `github:octo/widgets#${sessionCount}`,
    slug: `github-octo-widgets-${sessionCount}`,
    engine: extra.engine ?? 'claude',
    runner: 'process',
    engineSessionId,
    cwd: '/tmp',
    credentialKind: 'api-key',
    credentialEnv: 'ANTHROPIC_API_KEY',
    payerId: PAYER_ID,
  });
}

/** The bearer token out of the env an opted-in engine would get. */
function tokenOf(env: Record<string, string> | undefined): string {
  const header = env?.OTEL_EXPORTER_OTLP_HEADERS ?? '';
  const match = /^authorization=Bearer (\S+)$/.exec(header);
  if (!match?.[1]) throw new Error(`no bearer token in ${JSON.stringify(header)}`);
  return match[1];
}

async function start(
  options: { signal?: Signal; maxBodyBytes?: number; dataDir?: string; startedAt?: Date } = {},
): Promise<Harness> {
  const dir = options.dataDir ?? tempDir();
  const db = openDb(join(dir, 'the-loop.db'));
  cleanups.push(() => {
    if (db.open) db.close();
  });
  const clock = { now: options.startedAt ?? new Date('2026-12-02T23:40:00.000Z') };
  const store = new SqliteSessionStore(db, { scrub: (t) => t, now: () => clock.now });
  const ledger = new Ledger(new SqliteLedgerStore(db), priceTable());
  const sink = memorySink();
  // No scrubber: the receiver itself must keep tokens out of the log, not rely on redaction.
  const logger = createLogger({ level: 'debug', sinks: [sink] });
  const secrets: string[] = [];
  const receiver = new TelemetryReceiver({
    store,
    ledger,
    logger,
    dataDir: dir,
    engines: { claude: preset(options.signal ?? 'logs') },
    addSecret: (value) => secrets.push(value),
    ...(options.maxBodyBytes === undefined ? {} : { maxBodyBytes: options.maxBodyBytes }),
  });
  const server = await startHttpServer({ host: '127.0.0.1', port: 0, routes: receiver.routes(), logger });
  cleanups.push(() => server.close());
  receiver.listenAt(server.url);
  const session = await newSession(store, ENGINE_SESSION);
  const turn = await store.beginTurn(session.id, { promptDigest: 'd', promptBytes: 1, meter: 'otel' });
  const token = tokenOf(receiver.envFor(session.id, preset(options.signal ?? 'logs')));
  return {
    dir,
    db,
    store,
    ledger,
    receiver,
    server,
    logLines: sink.lines,
    secrets,
    clock,
    session,
    turn,
    token,
  };
}

interface Reply {
  status: number;
  text: string;
  headers: Headers;
}

async function post(
  h: Harness,
  path: string,
  body: string | Buffer,
  options: { token?: string | null; headers?: Record<string, string> } = {},
): Promise<Reply> {
  const token = options.token === undefined ? h.token : options.token;
  const res = await fetch(`${h.server.url}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...options.headers,
    },
    body,
  });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/**
 * A POST through node:http, for what fetch does not let a test control: a declared length whose
 * body never comes, or a chunked body. Resolves with the response; the socket is then dropped.
 */
function rawPost(
  h: Harness,
  path: string,
  headers: Record<string, string>,
  chunks: Buffer[],
  end: boolean,
): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, h.server.url);
    const req = request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${h.token}`, ...headers },
      },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (c: Buffer) => parts.push(c));
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString('utf8') });
          req.destroy();
        });
        res.on('error', reject);
      },
    );
    // The server may close the connection as soon as it has answered: a late write error is expected.
    req.on('error', (error) => reject(error));
    for (const chunk of chunks) req.write(chunk);
    if (end) req.end();
    else req.flushHeaders();
  });
}

interface Row {
  meter: string;
  source_id: string;
  at: string;
  session_id: string | null;
  work_item: string | null;
  turn_id: number | null;
  engine: string | null;
  runner: string | null;
  model: string | null;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_creation_tokens: number;
  reasoning_tokens: number;
  cost_usd: number | null;
  cost_basis: string | null;
  payer_kind: string;
  payer_id: string | null;
}

/** A turn's unmetered drive, as the ledger records one. */
const unmetered = (h: Harness, turnId: number, reason: string) =>
  h.ledger.recordUnmetered({
    at: FIXTURE_AT,
    sessionId: h.session.id,
    workItem: h.session.workItem,
    turnId,
    engine: 'claude',
    runner: 'process',
    reason,
  });
const rows = (h: Harness): Row[] => h.db.prepare('SELECT * FROM usage_ledger ORDER BY id').all() as Row[];
const drives = (h: Harness) =>
  h.db.prepare('SELECT turn_id, reason FROM unmetered_drives ORDER BY turn_id').all() as Array<{
    turn_id: number;
    reason: string;
  }>;

const sum = (list: Row[]) => ({
  input: list.reduce((n, r) => n + r.input_tokens, 0),
  output: list.reduce((n, r) => n + r.output_tokens, 0),
  cacheRead: list.reduce((n, r) => n + r.cache_read_tokens, 0),
  cacheCreation: list.reduce((n, r) => n + r.cache_creation_tokens, 0),
});

// ---- synthetic OTLP payloads --------------------------------------------------------------------

const kv = (key: string, value: Record<string, unknown>) => ({ key, value });

function apiRequest(o: {
  requestId: string;
  at: Date;
  input?: unknown;
  sessionId?: string | null;
}): Record<string, unknown> {
  return {
    timeUnixNano: `${o.at.getTime()}000000`,
    body: { stringValue: 'claude_code.api_request' },
    attributes: [
      ...(o.sessionId === null ? [] : [kv('session.id', { stringValue: o.sessionId ?? ENGINE_SESSION })]),
      kv('event.name', { stringValue: 'api_request' }),
      kv('model', { stringValue: 'claude-sonnet-4-5' }),
      kv('input_tokens', { intValue: o.input ?? '100' }),
      kv('output_tokens', { intValue: '10' }),
      kv('cache_read_tokens', { intValue: '0' }),
      kv('cache_creation_tokens', { intValue: '0' }),
      kv('request_id', { stringValue: o.requestId }),
    ],
  };
}

const logsBody = (records: unknown[]) =>
  JSON.stringify({ resourceLogs: [{ resource: { attributes: [] }, scopeLogs: [{ logRecords: records }] }] });

const partial = (text: string) =>
  (JSON.parse(text) as { partialSuccess?: Record<string, unknown> }).partialSuccess;

// ---- tests --------------------------------------------------------------------------------------

describe('TelemetryReceiver.envFor', () => {
  it('is undefined for an engine that does not opt in, and registers no secret', async () => {
    const h = await start();
    const before = h.secrets.length;
    expect(h.receiver.envFor(h.session.id, preset('logs', false))).toBeUndefined();
    expect(h.receiver.envFor(h.session.id, mergeEngine('claude', BUILTIN_PRESETS.claude, undefined))).toBe(
      undefined,
    );
    expect(h.secrets.length).toBe(before);
  });

  it('is undefined while nothing listens', async () => {
    const h = await start();
    h.receiver.listenAt(undefined);
    expect(h.receiver.endpoint).toBeUndefined();
    expect(h.receiver.envFor(h.session.id, preset('logs'))).toBeUndefined();

    const dir = tempDir();
    const db = openDb(join(dir, 'the-loop.db'));
    cleanups.push(() => {
      db.close();
    });
    const secrets: string[] = [];
    const idle = new TelemetryReceiver({
      store: new SqliteSessionStore(db, { scrub: (t) => t }),
      ledger: new Ledger(new SqliteLedgerStore(db), priceTable()),
      logger: createLogger({ level: 'debug', sinks: [memorySink()] }),
      dataDir: dir,
      engines: { claude: preset('logs') },
      addSecret: (v) => secrets.push(v),
    });
    expect(idle.envFor('any-session', preset('logs'))).toBeUndefined();
    expect(secrets).toEqual([]);
  });

  it('points the chosen signal’s exporter at the receiver, over OTLP/HTTP JSON, with the token', async () => {
    const h = await start();
    const env = h.receiver.envFor(h.session.id, preset('logs'));
    expect(env).toEqual({
      CLAUDE_CODE_ENABLE_TELEMETRY: '1',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: h.server.url,
      OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${h.token}`,
      OTEL_LOGS_EXPORTER: 'otlp',
      OTEL_METRICS_EXPORTER: 'none',
      OTEL_TRACES_EXPORTER: 'none',
      OTEL_LOGS_EXPORT_INTERVAL: '1000',
      OTEL_METRIC_EXPORT_INTERVAL: '1000',
      OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: 'delta',
    });
    expect(h.server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(h.token).toMatch(new RegExp(`^tl1\\.${h.session.id}\\.[0-9a-f]{32}$`));

    const metrics = h.receiver.envFor(h.session.id, preset('metrics'));
    expect(metrics?.OTEL_LOGS_EXPORTER).toBe('none');
    expect(metrics?.OTEL_METRICS_EXPORTER).toBe('otlp');
    expect(metrics?.OTEL_TRACES_EXPORTER).toBe('none');

    const slow = mergeEngine('claude', BUILTIN_PRESETS.claude, {
      otel: { enabled: true, exportIntervalMs: 5000 },
    } as EngineOverride);
    expect(h.receiver.envFor(h.session.id, slow)?.OTEL_LOGS_EXPORT_INTERVAL).toBe('5000');
  });

  it('registers each token it hands out with the scrubber', async () => {
    const h = await start();
    expect(h.secrets).toContain(h.token);
    const other = tokenOf(h.receiver.envFor('another-session', preset('logs')));
    expect(h.secrets).toContain(other);
    expect(h.secrets.every((s) => s.length >= 8)).toBe(true);
  });

  it('gives a token per session, stable for the installation (key kept 0600 in the data dir)', async () => {
    const h = await start();
    const again = tokenOf(h.receiver.envFor(h.session.id, preset('logs')));
    expect(again).toBe(h.token);
    expect(tokenOf(h.receiver.envFor('another-session', preset('logs')))).not.toBe(h.token);
    expect(statSync(join(h.dir, 'otel-key')).mode & 0o777).toBe(0o600);

    // Another receiver on the same data dir (a restarted daemon) hands out, and accepts, the same token.
    const secrets: string[] = [];
    const restarted = new TelemetryReceiver({
      store: h.store,
      ledger: h.ledger,
      logger: createLogger({ level: 'debug', sinks: [memorySink()] }),
      dataDir: h.dir,
      engines: { claude: preset('logs') },
      addSecret: (v) => secrets.push(v),
    });
    restarted.listenAt(h.server.url);
    expect(tokenOf(restarted.envFor(h.session.id, preset('logs')))).toBe(h.token);
  });

  it('reaches an unspecified listen address on the loopback', async () => {
    const h = await start();
    h.receiver.listenAt('http://0.0.0.0:4318');
    expect(h.receiver.endpoint).toBe('http://127.0.0.1:4318');
    expect(h.receiver.envFor(h.session.id, preset('logs'))?.OTEL_EXPORTER_OTLP_ENDPOINT).toBe(
      'http://127.0.0.1:4318',
    );
    h.receiver.listenAt('http://[::]:4318');
    expect(h.receiver.endpoint).toBe('http://[::1]:4318');
  });
});

describe('POST /v1/logs', () => {
  it("records the real Claude Code export as one otel row of the token's session and running turn", async () => {
    const h = await start();
    const res = await post(h, '/v1/logs', LOGS);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(JSON.parse(res.text)).toEqual({});
    expect(rows(h)).toEqual([
      expect.objectContaining({
        meter: 'otel',
        source_id: `${h.session.id}:log:req_4SqDJ_4AilbEgiXC`,
        at: FIXTURE_AT,
        session_id: h.session.id,
        work_item: h.session.workItem,
        turn_id: h.turn.id,
        engine: 'claude',
        runner: 'process',
        model: 'claude-opus-4-8',
        input_tokens: 321,
        output_tokens: 12,
        cache_read_tokens: 40,
        cache_creation_tokens: 7,
        reasoning_tokens: 0,
        cost_usd: FIXTURE_COST,
        cost_basis: 'engine-reported',
        payer_kind: 'api-key',
        payer_id: PAYER_ID,
      }),
    ]);
  });

  it('adds nothing when the same export is posted again', async () => {
    const h = await start();
    expect((await post(h, '/v1/logs', LOGS)).status).toBe(200);
    const first = rows(h);
    for (let n = 0; n < 3; n++) {
      const res = await post(h, '/v1/logs', LOGS);
      expect(res.status).toBe(200);
      expect(JSON.parse(res.text)).toEqual({});
    }
    expect(rows(h)).toEqual(first);
  });

  it('accepts a lower-case bearer scheme, a charset, and a query string', async () => {
    const h = await start();
    const res = await fetch(`${h.server.url}/v1/logs?x=1`, {
      method: 'POST',
      headers: { 'content-type': 'application/json; charset=utf-8', authorization: `bearer ${h.token}` },
      body: LOGS,
    });
    expect(res.status).toBe(200);
    expect(rows(h)).toHaveLength(1);
  });

  it("removes the turn's NO_TELEMETRY_YET drive when its telemetry arrives", async () => {
    const h = await start();
    const endedAt = '2026-12-02T23:40:25.000Z';
    await h.store.finishTurn(h.turn.id, {
      status: 'succeeded',
      endReason: 'result',
      endedAt,
      exitCode: 0,
      exitSignal: null,
      model: null,
      usage: null,
      costUsd: null,
      error: null,
    });
    const result = await h.ledger.recordTurn(
      {
        sessionId: h.session.id,
        workItem: h.session.workItem,
        turnId: h.turn.id,
        engine: 'claude',
        runner: 'process',
        meter: 'otel',
        endedAt,
        payer: { kind: 'api-key', id: PAYER_ID },
      },
      [],
      { usage: null, model: null, costUsd: null, nextBaseline: null, warnings: [] },
      'the engine reported no usage',
    );
    expect(result.unmetered).toBe(true);
    expect(drives(h)).toEqual([{ turn_id: h.turn.id, reason: NO_TELEMETRY_YET }]);

    expect((await post(h, '/v1/logs', LOGS)).status).toBe(200);
    expect(drives(h)).toEqual([]);
    expect(rows(h).map((r) => r.turn_id)).toEqual([h.turn.id]);
  });

  it('leaves a drive with another reason, and the drives of other turns', async () => {
    const h = await start();
    await unmetered(h, h.turn.id, 'lost: the owner died');
    const other = await newSession(h.store, randomUUID());
    const otherTurn = await h.store.beginTurn(other.id, { promptDigest: 'd', promptBytes: 1, meter: 'otel' });
    await unmetered(h, otherTurn.id, NO_TELEMETRY_YET);

    expect((await post(h, '/v1/logs', LOGS)).status).toBe(200);
    expect(rows(h)).toHaveLength(1);
    expect(drives(h)).toEqual([
      { turn_id: h.turn.id, reason: 'lost: the owner died' },
      { turn_id: otherTurn.id, reason: NO_TELEMETRY_YET },
    ]);
  });

  it('attributes each record to the turn running at its time', async () => {
    const base = Math.floor(Date.now() / 1000) * 1000 - 3_600_000;
    const h = await start({ startedAt: new Date(base) });
    const first = h.turn;
    await h.store.finishTurn(first.id, {
      status: 'succeeded',
      endReason: 'result',
      endedAt: new Date(base + 50_000).toISOString(),
      exitCode: 0,
      exitSignal: null,
      model: null,
      usage: null,
      costUsd: null,
      error: null,
    });
    h.clock.now = new Date(base + 60_000);
    const second = await h.store.beginTurn(h.session.id, {
      promptDigest: 'd',
      promptBytes: 1,
      meter: 'otel',
    });

    const res = await post(
      h,
      '/v1/logs',
      logsBody([
        apiRequest({ requestId: 'during-first', at: new Date(base + 30_000) }),
        apiRequest({ requestId: 'during-second', at: new Date(base + 90_000) }),
        // Sent late: after the second turn began, but made during the first.
        apiRequest({ requestId: 'late-of-first', at: new Date(base + 45_000) }),
        // Before any turn (a clock behind ours): the latest turn.
        apiRequest({ requestId: 'before-any', at: new Date(base - 60_000) }),
      ]),
    );
    expect(res.status).toBe(200);
    expect(Object.fromEntries(rows(h).map((r) => [r.source_id.split(':').at(-1), r.turn_id]))).toEqual({
      'during-first': first.id,
      'during-second': second.id,
      'late-of-first': first.id,
      'before-any': second.id,
    });
  });

  it('counts records without a session.id for the token’s session', async () => {
    const h = await start();
    const res = await post(
      h,
      '/v1/logs',
      logsBody([apiRequest({ requestId: 'anon', at: new Date(), sessionId: null })]),
    );
    expect(res.status).toBe(200);
    expect(rows(h).map((r) => [r.session_id, r.turn_id, r.input_tokens])).toEqual([
      [h.session.id, h.turn.id, 100],
    ]);
  });

  it("does not count records of another engine session than the token's: 200 with partialSuccess", async () => {
    const h = await start();
    const other = await newSession(h.store, randomUUID());
    const otherToken = tokenOf(h.receiver.envFor(other.id, preset('logs')));
    const res = await post(h, '/v1/logs', LOGS, { token: otherToken });
    expect(res.status).toBe(200);
    expect(partial(res.text)).toEqual({
      rejectedLogRecords: 1,
      errorMessage: expect.stringContaining("another engine session than the token's"),
    });
    expect(rows(h)).toEqual([]);
  });

  it('answers partialSuccess for the records it could not read, and keeps the rest', async () => {
    const h = await start();
    const res = await post(
      h,
      '/v1/logs',
      logsBody([
        apiRequest({ requestId: 'ok', at: new Date() }),
        apiRequest({ requestId: 'negative', at: new Date(), input: '-5' }),
        apiRequest({ requestId: 'huge', at: new Date(), input: '9007199254740993' }),
      ]),
    );
    expect(res.status).toBe(200);
    expect(partial(res.text)).toEqual({
      rejectedLogRecords: 2,
      errorMessage: '2 × api_request events with a token count that is not a non-negative integer',
    });
    expect(rows(h).map((r) => r.source_id)).toEqual([`${h.session.id}:log:ok`]);
    expect(h.logLines.some((l) => l.includes('OTLP post partly unreadable'))).toBe(true);
  });

  it('answers a JSON body that is not an OTLP export with a partialSuccess warning', async () => {
    const h = await start();
    for (const body of ['{}', '[]', 'null', '"text"', '{"resourceLogs": 5}']) {
      const res = await post(h, '/v1/logs', body);
      expect(res.status, body).toBe(200);
      expect(partial(res.text), body).toEqual({
        rejectedLogRecords: 0,
        errorMessage: 'not an OTLP logs payload (no resourceLogs array)',
      });
    }
    expect(rows(h)).toEqual([]);
  });

  describe('refuses writes without a valid session token: 401, nothing recorded', () => {
    const cases: Array<[string, (h: Harness) => Record<string, string>]> = [
      ['no Authorization header', () => ({})],
      ['an empty bearer', () => ({ authorization: 'Bearer ' })],
      ['another scheme', (h) => ({ authorization: `Basic ${h.token}` })],
      [
        'a wrong MAC',
        (h) => ({ authorization: `Bearer ${h.token.slice(0, -1)}${h.token.endsWith('0') ? '1' : '0'}` }),
      ],
      ['a truncated token', (h) => ({ authorization: `Bearer ${h.token.slice(0, -2)}` })],
      ['a token with trailing text', (h) => ({ authorization: `Bearer ${h.token}x` })],
      ['two tokens', (h) => ({ authorization: `Bearer ${h.token} ${h.token}` })],
      [
        'an upper-case MAC',
        (h) => ({ authorization: `Bearer ${h.token.toUpperCase().replace('TL1', 'tl1')}` }),
      ],
      [
        "the session's MAC under another session id",
        (h) => ({ authorization: `Bearer ${h.token.replace(h.session.id, randomUUID())}` }),
      ],
      ['a token of an older version', (h) => ({ authorization: `Bearer ${h.token.replace(/^tl1/, 'tl0')}` })],
    ];
    it.each(cases)('%s', async (_, headers) => {
      const h = await start();
      const res = await post(h, '/v1/logs', LOGS, { token: null, headers: headers(h) });
      expect(res.status).toBe(401);
      expect(res.text).toContain('missing or invalid session token');
      expect(rows(h)).toEqual([]);
    });

    it('a valid token of a session that does not exist', async () => {
      const h = await start();
      const ghost = tokenOf(h.receiver.envFor(randomUUID(), preset('logs')));
      const res = await post(h, '/v1/logs', LOGS, { token: ghost });
      expect(res.status).toBe(401);
      expect(rows(h)).toEqual([]);
    });

    it.each([
      ['closed', (h: Harness) => h.store.close(h.session.id, 'closed by hand')],
      ['lost', (h: Harness) => h.store.markGone(h.session.id, 'lost', 'tmux session gone')],
      ['ended', (h: Harness) => h.store.markGone(h.session.id, 'ended', 'the engine ended it')],
    ])('the token of a session that has %s', async (_, end) => {
      const h = await start();
      await end(h);
      const res = await post(h, '/v1/logs', LOGS);
      expect(res.status).toBe(401);
      expect(rows(h)).toEqual([]);
    });

    it("another installation's token for the same session id", async () => {
      const h = await start();
      const elsewhere = await start();
      // The same session id, a MAC under the other data dir's key.
      const foreign = tokenOf(elsewhere.receiver.envFor(h.session.id, preset('logs')));
      expect(foreign).not.toBe(h.token);
      const res = await post(h, '/v1/logs', LOGS, { token: foreign });
      expect(res.status).toBe(401);
      expect(rows(h)).toEqual([]);
    });
  });

  it.each(['GET', 'PUT', 'DELETE'])('answers %s with 405', async (method) => {
    const h = await start();
    const res = await fetch(`${h.server.url}/v1/logs`, {
      method,
      headers: { authorization: `Bearer ${h.token}` },
    });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('POST');
    expect(rows(h)).toEqual([]);
  });

  it.each(['application/x-protobuf', 'text/plain', ''])(
    'answers content type %j with 415 (OTLP/HTTP JSON only)',
    async (type) => {
      const h = await start();
      const res = await post(h, '/v1/logs', LOGS, { headers: { 'content-type': type } });
      expect(res.status).toBe(415);
      expect(res.text).toContain('http/json');
      expect(rows(h)).toEqual([]);
    },
  );

  it('answers a body that is not JSON with 400', async () => {
    const h = await start();
    for (const body of ['not json', '{"resourceLogs": [', '']) {
      const res = await post(h, '/v1/logs', body);
      expect(res.status, body).toBe(400);
      expect(res.text).toContain('not JSON');
    }
    expect(rows(h)).toEqual([]);
  });

  describe('body size', () => {
    it('answers a declared length over the limit with 413, before reading the body', async () => {
      const h = await start({ maxBodyBytes: 1024 });
      const res = await rawPost(h, '/v1/logs', { 'content-length': '4096' }, [], false);
      expect(res.status).toBe(413);
      expect(res.text).toContain('over the limit of 1024');
      expect(rows(h)).toEqual([]);
    });

    it('answers a chunked body that grows over the limit with 413', async () => {
      const h = await start({ maxBodyBytes: 1024 });
      const chunk = Buffer.from(' '.repeat(600));
      const res = await rawPost(h, '/v1/logs', {}, [chunk, chunk, chunk], true);
      expect(res.status).toBe(413);
      expect(res.text).toContain('over the limit of 1024 bytes');
      expect(rows(h)).toEqual([]);
    });

    it('answers fetch with a body over the limit with 413, and keeps serving', async () => {
      const h = await start({ maxBodyBytes: 1024 });
      const res = await post(h, '/v1/logs', `${' '.repeat(2048)}{}`);
      expect(res.status).toBe(413);
      expect(rows(h)).toEqual([]);
      // A body at the limit is fine, and the server still answers.
      const ok = await post(h, '/v1/logs', logsBody([apiRequest({ requestId: 'small', at: new Date() })]));
      expect(ok.status).toBe(200);
      expect(rows(h)).toHaveLength(1);
    });

    it('accepts a chunked body under the limit', async () => {
      const h = await start();
      const bytes = Buffer.from(LOGS);
      const third = Math.ceil(bytes.length / 3);
      const res = await rawPost(
        h,
        '/v1/logs',
        {},
        [bytes.subarray(0, third), bytes.subarray(third, 2 * third), bytes.subarray(2 * third)],
        true,
      );
      expect(res.status).toBe(200);
      expect(rows(h)).toHaveLength(1);
    });
  });

  describe('gzip', () => {
    it('accepts a gzip body', async () => {
      const h = await start();
      const res = await post(h, '/v1/logs', gzipSync(LOGS), { headers: { 'content-encoding': 'gzip' } });
      expect(res.status).toBe(200);
      expect(rows(h).map((r) => [r.input_tokens, r.output_tokens, r.cost_usd])).toEqual([
        [321, 12, FIXTURE_COST],
      ]);
    });

    it('answers a gzip bomb (small, expanding over the limit) with 413', async () => {
      const h = await start({ maxBodyBytes: 64 * 1024 });
      const bomb = gzipSync(Buffer.from(`{"resourceLogs":[],"pad":"${'A'.repeat(4 * 1024 * 1024)}"}`));
      expect(bomb.length).toBeLessThan(64 * 1024);
      const res = await post(h, '/v1/logs', bomb, { headers: { 'content-encoding': 'gzip' } });
      expect(res.status).toBe(413);
      expect(res.text).toContain('unzipped');
      expect(rows(h)).toEqual([]);
    });

    it('answers a body that is not gzip, or cut short, with 400', async () => {
      const h = await start();
      const zipped = gzipSync(LOGS);
      for (const body of [Buffer.from('plainly not gzip'), zipped.subarray(0, zipped.length - 12)]) {
        const res = await post(h, '/v1/logs', body, { headers: { 'content-encoding': 'gzip' } });
        expect(res.status).toBe(400);
        expect(res.text).toContain('not valid gzip');
      }
      expect(rows(h)).toEqual([]);
    });

    it('answers another content encoding with 415', async () => {
      const h = await start();
      const res = await post(h, '/v1/logs', LOGS, { headers: { 'content-encoding': 'br' } });
      expect(res.status).toBe(415);
      expect(rows(h)).toEqual([]);
    });
  });
});

describe('POST /v1/metrics', () => {
  it('records nothing for a session whose meter is the logs signal (200)', async () => {
    const h = await start({ signal: 'logs' });
    const res = await post(h, '/v1/metrics', METRICS);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.text)).toEqual({});
    expect(rows(h)).toEqual([]);
  });

  it('records nothing from logs for a session whose meter is the metrics signal (200)', async () => {
    const h = await start({ signal: 'metrics' });
    const res = await post(h, '/v1/logs', LOGS);
    expect(res.status).toBe(200);
    expect(rows(h)).toEqual([]);
  });

  it('records the real export for a metrics session, once', async () => {
    const h = await start({ signal: 'metrics' });
    const res = await post(h, '/v1/metrics', METRICS);
    expect(res.status).toBe(200);
    const recorded = rows(h);
    expect(recorded.length).toBeGreaterThanOrEqual(1);
    expect(sum(recorded)).toEqual({ input: 321, output: 12, cacheRead: 40, cacheCreation: 7 });
    for (const r of recorded) {
      expect(r).toMatchObject({
        meter: 'otel',
        session_id: h.session.id,
        work_item: h.session.workItem,
        turn_id: h.turn.id,
        model: 'claude-opus-4-8[1m]',
        payer_kind: 'api-key',
        payer_id: PAYER_ID,
      });
      expect(r.source_id).toMatch(new RegExp(`^${h.session.id}:metric:[0-9a-f]{24}$`));
    }
    expect(recorded.filter((r) => r.cost_basis === 'engine-reported').map((r) => r.cost_usd)).toEqual([
      FIXTURE_COST,
    ]);

    expect((await post(h, '/v1/metrics', METRICS)).status).toBe(200);
    expect(rows(h)).toEqual(recorded);
  });

  it('answers cumulative counters with partialSuccess (rejectedDataPoints) and records nothing', async () => {
    const h = await start({ signal: 'metrics' });
    const cumulative = METRICS.replaceAll('"aggregationTemporality": 1', '"aggregationTemporality": 2');
    expect(cumulative).not.toBe(METRICS);
    const res = await post(h, '/v1/metrics', cumulative);
    expect(res.status).toBe(200);
    expect(partial(res.text)).toEqual({
      rejectedDataPoints: 5,
      errorMessage: expect.stringContaining('not delta counters'),
    });
    expect(rows(h)).toEqual([]);
  });

  it("does not count metrics of another engine session than the token's", async () => {
    const h = await start({ signal: 'metrics' });
    const other = await newSession(h.store, randomUUID());
    const otherToken = tokenOf(h.receiver.envFor(other.id, preset('metrics')));
    const res = await post(h, '/v1/metrics', METRICS, { token: otherToken });
    expect(res.status).toBe(200);
    expect(partial(res.text)?.rejectedDataPoints).toBeGreaterThanOrEqual(1);
    expect(rows(h)).toEqual([]);
  });

  it('refuses a metrics post without a token (401)', async () => {
    const h = await start({ signal: 'metrics' });
    const res = await post(h, '/v1/metrics', METRICS, { token: null });
    expect(res.status).toBe(401);
    expect(rows(h)).toEqual([]);
  });
});

describe('secrets', () => {
  it('never writes a session token to the log or the registry, whatever the request', async () => {
    const h = await start({ maxBodyBytes: 64 * 1024 });
    const other = await newSession(h.store, randomUUID());
    const otherToken = tokenOf(h.receiver.envFor(other.id, preset('logs')));
    const ghostToken = tokenOf(h.receiver.envFor(randomUUID(), preset('logs')));
    const forged = h.token.replace(/.$/, (c) => (c === 'a' ? 'b' : 'a'));

    await post(h, '/v1/logs', LOGS);
    await post(h, '/v1/logs', LOGS, { token: otherToken });
    await post(h, '/v1/logs', LOGS, { token: ghostToken });
    await post(h, '/v1/logs', LOGS, { token: forged });
    await post(h, '/v1/logs', 'not json');
    await post(h, '/v1/metrics', METRICS);
    await post(h, '/v1/logs', logsBody([apiRequest({ requestId: 'neg', at: new Date(), input: '-1' })]));
    await post(h, '/v1/logs', Buffer.from('nope'), { headers: { 'content-encoding': 'gzip' } });
    await post(h, '/v1/logs', `${' '.repeat(70 * 1024)}{}`);
    await fetch(`${h.server.url}/v1/logs`, { headers: { authorization: `Bearer ${h.token}` } });

    const log = h.logLines.join('');
    expect(h.logLines.length).toBeGreaterThan(3);
    for (const token of [h.token, otherToken, ghostToken, forged]) {
      expect(log).not.toContain(token);
      // Not even the MAC part on its own.
      expect(log).not.toContain(token.split('.')[2]);
    }
    // The registry (and its write-ahead log) hold no token either.
    h.db.pragma('wal_checkpoint(TRUNCATE)');
    const registry = readFileSync(join(h.dir, 'the-loop.db'));
    for (const token of [h.token, otherToken]) expect(registry.includes(token)).toBe(false);
  });
});
