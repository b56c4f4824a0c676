/**
 * `the-loop console` against a real daemon process: the link it prints logs in once (a replay is
 * refused), `--json` and `--open` (a recording xdg-open on PATH, given the link as one argv
 * element), clear errors with no daemon or the console disabled; the token and console.json are
 * 0600 and the token is in no output or log. And the canary: a secret in the daemon's environment,
 * echoed by an engine into a session, is in no console page, API answer, live message or log line.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { LOGIN_ID_META, LOGIN_KEY_META, WS_PROTOCOL } from '../../src/console/protocol.js';
import { makeTicket, metaOf } from '../console/server-rig.js';
import { canaryNeedles } from '../helpers/canary.js';
import { fakeEngineConfig, makeProject, runCli } from '../helpers/cli.js';
import { type DaemonProcess, startDaemonProcess } from '../helpers/daemon.js';

const CANARY = 'sk-ant-canary-console-5f1e2d3c4b5a69788796';

function get(url: string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: Record<string, unknown>; body: string }>(
    (resolve, reject) => {
      const req = request(url, { headers, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => {
          body += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      });
      req.on('error', reject);
      req.end();
    },
  );
}

describe('the-loop console', () => {
  const project = makeProject({});
  const state = join(project.dir, 'engine-state');
  const dataDir = join(project.dir, '.the-loop');
  let daemon: DaemonProcess | undefined;
  const env = { ANTHROPIC_API_KEY: CANARY };
  const cli = (args: string[], extra: Record<string, string> = {}) =>
    runCli(args, { cwd: project.dir, env: { ...env, ...extra } });

  beforeAll(async () => {
    mkdirSync(state, { recursive: true });
    writeFileSync(
      join(dataDir, 'config.yaml'),
      JSON.stringify({
        ...fakeEngineConfig(state),
        gateway: { enabled: false },
        console: { port: 0 },
        webhook: { secret: 'a-webhook-secret-of-some-length' },
      }),
    );
  });

  afterAll(async () => {
    await daemon?.stop();
    project.cleanup();
  });

  it('says so when no daemon runs', async () => {
    const res = await cli(['console']);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/no daemon running/);
    expect(res.stderr).toMatch(/the-loop serve/);
  });

  it('prints a link that logs in once, to the running daemon', async () => {
    // A session whose engine said the key out loud (the canary test below reads it in the console).
    expect((await cli(['run', 'github:o/r#9', 'mode:echo-secret'])).code).toBe(0);
    daemon = await startDaemonProcess({ cwd: project.dir, env });
    const file = join(dataDir, 'console.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(join(dataDir, 'console-token')).mode & 0o777).toBe(0o600);
    const text = await cli(['console', '--as', 'ann']);
    expect(text.code).toBe(0);
    const { url: origin } = JSON.parse(readFileSync(file, 'utf8')) as { url: string };
    expect(text.stdout).toContain(`${origin}/login/v1.`);
    expect(text.stdout).toMatch(/logs in once, as ann/);
    const json = await cli(['console', '--json']);
    const printed = JSON.parse(json.stdout) as { url: string; expiresAt: string };
    expect(printed.url.startsWith(`${origin}/login/v1.`)).toBe(true);
    expect(Date.parse(printed.expiresAt) - Date.now()).toBeLessThanOrEqual(61_000);
    // The login page: the cookie, and the login's key for the browser to keep (localStorage).
    const first = await get(printed.url);
    expect(first.status).toBe(200);
    expect(String(first.headers['set-cookie'])).toMatch(/^loop_console=/);
    expect(metaOf(first.body, LOGIN_KEY_META)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await get(printed.url)).status).toBe(403);
    const token = readFileSync(join(dataDir, 'console-token'), 'utf8').trim();
    const log = readFileSync(join(dataDir, 'the-loop.log'), 'utf8');
    for (const out of [text.stdout, text.stderr, json.stdout, daemon.output(), log])
      expect(out).not.toContain(token);
    expect(log).not.toContain(printed.url.split('/login/')[1]);
    const bearer = await get(`${origin}/api/sessions`, { authorization: `Bearer ${token}` });
    expect(bearer.status).toBe(200);
  });

  it('--open runs xdg-open with the link as one argument', async () => {
    const bin = join(project.dir, 'bin');
    mkdirSync(bin, { recursive: true });
    const record = join(project.dir, 'opened.json');
    writeFileSync(
      join(bin, 'xdg-open'),
      `#!${process.execPath}\nrequire('node:fs').writeFileSync(${JSON.stringify(record)}, JSON.stringify(process.argv.slice(2)));\n`,
    );
    chmodSync(join(bin, 'xdg-open'), 0o755);
    const res = await cli(['console', '--open'], { PATH: `${bin}:${process.env.PATH}` });
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/Opened the console/);
    expect(res.stdout).not.toContain('/login/');
    for (let i = 0; i < 100 && !existsSync(record); i++) await new Promise((r) => setTimeout(r, 50));
    const argv = JSON.parse(readFileSync(record, 'utf8')) as string[];
    expect(argv).toHaveLength(1);
    expect(argv[0]).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/login\/v1\./);
    expect((await get(argv[0] as string)).status).toBe(200);
  });

  it('shows no secret of the daemon in any page, API answer, live message or log line', async () => {
    const { url } = JSON.parse((await cli(['console', '--json'])).stdout) as { url: string };
    const origin = new URL(url).origin;
    const login = await get(url);
    const cookie = String(login.headers['set-cookie']).split(';')[0] as string;
    // As a page does: the cookie and a ticket made with the key the login page carried.
    const key = { publicId: metaOf(login.body, LOGIN_ID_META), key: metaOf(login.body, LOGIN_KEY_META) };
    const seen: Array<{ what: string; text: string }> = [{ what: 'the login page', text: login.body }];
    const fetchAs = async (path: string) => {
      const res = await get(`${origin}${path}`, { cookie, 'x-loop-ticket': makeTicket(key) });
      expect(res.status, path).toBe(200);
      seen.push({ what: path, text: res.body });
      return res;
    };
    const rows = JSON.parse((await fetchAs('/api/sessions')).body) as Array<{ id: string }>;
    expect(rows.length).toBeGreaterThan(0);
    const id = rows[0]?.id as string;
    for (const path of [
      `/api/sessions/${id}`,
      '/api/usage?by=session',
      '/api/acts',
      '/sessions',
      `/sessions/${id}`,
      '/healthz',
    ]) {
      await fetchAs(path);
    }
    // The live socket as an API client sees it (the pages may not be built here: no ticket).
    const token = readFileSync(join(dataDir, 'console-token'), 'utf8').trim();
    seen.push(...(await liveMessages(origin, token, id)));
    seen.push({ what: 'the log', text: readFileSync(join(dataDir, 'the-loop.log'), 'utf8') });
    seen.push({ what: 'the daemon output', text: daemon?.output() ?? '' });
    expect(JSON.stringify(seen)).toContain('[secret]');
    for (const { what, text } of seen) {
      for (const { form, needle } of canaryNeedles(CANARY))
        expect(text.includes(needle), `${what}: ${form}`).toBe(false);
    }
  });

  it('removes console.json when the daemon stops', async () => {
    await daemon?.stop();
    daemon = undefined;
    expect(existsSync(join(dataDir, 'console.json'))).toBe(false);
    expect((await cli(['console'])).stderr).toMatch(/no daemon running/);
  });

  it('refuses when the console is disabled', async () => {
    const other = makeProject({ console: { enabled: false } });
    try {
      const res = await runCli(['console'], { cwd: other.dir });
      expect(res.code).toBe(2);
      expect(res.stderr).toMatch(/the console is disabled/);
    } finally {
      other.cleanup();
    }
  });
});

/** What the live socket sends a page watching the session, for a second. */
async function liveMessages(origin: string, token: string, id: string) {
  const ws = new WebSocket(`${origin.replace('http', 'ws')}/ws/live`, [WS_PROTOCOL], {
    headers: { authorization: `Bearer ${token}` },
  });
  const seen: Array<{ what: string; text: string }> = [];
  ws.on('message', (data) => seen.push({ what: 'live message', text: String(data) }));
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  ws.send(JSON.stringify({ t: 'watch', sessionId: id }));
  await new Promise((r) => setTimeout(r, 1000));
  ws.close();
  expect(seen.some((m) => m.text.includes('"t":"events"'))).toBe(true);
  return seen;
}
