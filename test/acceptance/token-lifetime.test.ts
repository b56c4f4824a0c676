/**
 * Issue 12, "token lifetime": every per-session capability ends with its session. A real daemon
 * (`the-loop serve`) runs a turn of an engine metered by OpenTelemetry; its session's OTLP token is
 * accepted while the session is active and refused with 401 — adding no usage row — once
 * `the-loop sessions close` (the real CLI) has ended it. The same close revokes the session's
 * gateway tokens, and `sessions keys` refuses the ended session.
 */
import { createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fakeEngineConfig, ROOT, runCli } from '../helpers/cli.js';
import { type DaemonProcess, startDaemonProcess } from '../helpers/daemon.js';

const WI = 'github:octo/widgets#8';
const SECRET = 'token-lifetime-webhook-secret-0123456789';
const FIXTURE = readFileSync(join(ROOT, 'test/fixtures/otlp/claude-2.1.197.logs.json'), 'utf8');

interface Attribute {
  key: string;
  value: { stringValue?: string };
}
interface OtlpLogs {
  resourceLogs: Array<{ scopeLogs: Array<{ logRecords: Array<{ attributes: Attribute[] }> }> }>;
}

/**
 * A real Claude Code logs export, made this session's: no engine session id of another (the fake
 * engine's id is its own), and a request id of its own so a second post is not a duplicate.
 */
function otlpPayload(requestId: string): string {
  const logs = JSON.parse(FIXTURE) as OtlpLogs;
  for (const resource of logs.resourceLogs)
    for (const scope of resource.scopeLogs)
      for (const record of scope.logRecords) {
        record.attributes = record.attributes.filter((a) => a.key !== 'session.id');
        for (const a of record.attributes) if (a.key === 'request_id') a.value = { stringValue: requestId };
      }
  return JSON.stringify(logs);
}

describe('a session ended by `sessions close` loses its tokens', () => {
  let root: string;
  let dataDir: string;
  let daemon: DaemonProcess;
  let env: Record<string, string>;
  let otlpUrl: string;
  let sessionId: string;
  const cli = (args: string[]) => runCli(args, { cwd: root, env });

  const db = () => new Database(join(dataDir, 'the-loop.db'), { readonly: true });
  const otelRows = (): number => {
    const handle = db();
    try {
      return handle
        .prepare("SELECT COUNT(*) FROM usage_ledger WHERE meter = 'otel' AND session_id = ?")
        .pluck()
        .get(sessionId) as number;
    } finally {
      handle.close();
    }
  };
  /** The session's OTLP token, as the engine was given it (an HMAC under the data dir's key). */
  const token = (): string => {
    const key = Buffer.from(readFileSync(join(dataDir, 'otel-key'), 'utf8').trim(), 'hex');
    return `tl1.${sessionId}.${createHmac('sha256', key).update(`otel:${sessionId}`).digest('hex').slice(0, 32)}`;
  };
  const post = (requestId: string) =>
    fetch(otlpUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token()}` },
      body: otlpPayload(requestId),
    });

  beforeAll(async () => {
    root = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-tokens-')));
    const state = join(root, 'engine-state');
    mkdirSync(state);
    dataDir = join(root, 'data');
    const config = {
      ...fakeEngineConfig(state, { otel: { enabled: true, signal: 'logs' } }),
      dataDir: 'data',
      webhook: { secret: SECRET },
    };
    writeFileSync(join(root, 'config.yaml'), stringify(config));
    env = { THE_LOOP_CONFIG: join(root, 'config.yaml') };
    daemon = await startDaemonProcess({ cwd: root, env });
    otlpUrl = daemon.webhookUrl.replace(/\/gh-webhook$/, '/v1/logs');
    // `run` hands the turn to the daemon and follows it to its end.
    const run = await cli(['run', WI, 'hello']);
    expect(run.code, run.stderr).toBe(0);
    const show = JSON.parse((await cli(['sessions', 'show', WI, '--json'])).stdout) as {
      session: { id: string; status: string };
    };
    expect(show.session.status).toBe('active');
    sessionId = show.session.id;
  }, 90_000);
  afterAll(async () => {
    await daemon?.stop();
    rmSync(root, { recursive: true, force: true });
  });

  it('accepts the token while the session is active', async () => {
    const before = otelRows();
    const res = await post('req_while_active');
    expect(res.status, await res.text()).toBe(200);
    expect(otelRows()).toBe(before + 1);
  });

  it('refuses it with 401 after `sessions close`, adding no usage row', async () => {
    const close = await cli(['sessions', 'close', WI]);
    expect(close.code, close.stderr).toBe(0);
    expect(close.stdout).toMatch(/closed/);
    const before = otelRows();
    const res = await post('req_after_close');
    expect(res.status).toBe(401);
    expect(await res.text()).toMatch(/missing or invalid session token/);
    expect(otelRows()).toBe(before);
  });

  it("revokes the session's gateway tokens, and keys no longer reach it", async () => {
    const handle = db();
    try {
      const tokens = handle
        .prepare('SELECT revoked_at FROM gateway_tokens WHERE session_id = ?')
        .all(sessionId) as Array<{ revoked_at: string | null }>;
      // One minted for the turn (the gateway served it), none left valid.
      expect(tokens.length).toBeGreaterThan(0);
      expect(tokens.filter((t) => t.revoked_at === null)).toEqual([]);
    } finally {
      handle.close();
    }
    const keys = await cli(['sessions', 'keys', WI, 'Enter']);
    expect(keys.code).toBe(2);
    expect(keys.stderr).toMatch(/session is closed: no keys reach it/);
  });
});
