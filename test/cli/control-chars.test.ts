import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { oneLine, stripControls, toJson } from '../../src/core/text.js';
import { BIN, fakeEngineConfig } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';

/**
 * Issue 12, item 7: no command prints a control character that came from outside. Real signed
 * deliveries to a real daemon, a real (fake) engine that reports escape sequences, and the real CLI,
 * read as raw bytes.
 */

const SECRET = 'test-webhook-secret-control-chars-0123';
const WI = 'github:acme/widgets#15';
/** What a terminal acts on: C0 but tab and newline, DEL, C1; and bidi overrides. */
const FORBIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
const HOSTILE = '\u001b]0;pwned\u0007\u001b[2J\u009b31m\u0090dcs\u009c\u0007\u0000\u007f\u202e\r';

interface Raw {
  code: number | null;
  stdout: Buffer;
  stderr: Buffer;
}

/** The built CLI as a child process (argv array), its output kept as bytes. */
function cli(cwd: string, args: string[], env: Record<string, string>): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        XDG_STATE_HOME: process.env.XDG_STATE_HOME,
        LANG: 'C.UTF-8',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout: Buffer.concat(out), stderr: Buffer.concat(err) }));
  });
}

/** Bytes that are valid UTF-8 (no stray 8-bit C1 byte) holding no forbidden character. */
function expectClean(bytes: Buffer, what: string): string {
  const text = bytes.toString('utf8');
  expect(Buffer.from(text, 'utf8').equals(bytes), `${what}: not valid UTF-8`).toBe(true);
  const bad = FORBIDDEN.exec(text);
  expect(bad, `${what}: U+${bad?.[0].charCodeAt(0).toString(16)} at ${bad?.index}`).toBeNull();
  return text;
}

describe('stripControls, oneLine and toJson', () => {
  it('remove escape sequences whole (no printable tail) and every C0/DEL/C1 control but \\n and \\t', () => {
    const text = `a${HOSTILE}b\tc\nd\u001b[38;5;196mred\u001b[0m\u001bPq#0;2\u001b\\e\u001b(Bf\u009d8;;x\u009cg`;
    expect(stripControls(text)).toBe('ab\tc\ndredefg');
    expect(oneLine(`x\n${HOSTILE}\ty`)).toBe('x y');
  });

  it('an unterminated OSC string ends at the end of its line, keeping the lines after it', () => {
    expect(stripControls('one\u001b]0;title never ends\ntwo')).toBe('one\ntwo');
  });

  it('toJson keeps the value and escapes DEL, C1 and bidi (JSON.stringify leaves them raw)', () => {
    const value = { action: `opened${HOSTILE}`, sep: '\u2028' };
    expect(JSON.stringify(value)).toMatch(/[\u009b\u202e]/);
    const json = toJson(value, 2);
    expect(json).not.toMatch(FORBIDDEN);
    expect(json).toContain('\\u009b');
    expect(json).toContain('\\u001b');
    expect(JSON.parse(json)).toEqual(value);
  });
});

describe('the CLI prints no control character from a payload or an engine', () => {
  let root: string;
  let daemon: DaemonProcess;
  let env: Record<string, string>;
  const ids: Record<string, string> = {};
  const run = (args: string[]) => cli(root, args, env);

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-controls-'));
    const state = join(root, 'engine-state');
    const repo = join(root, 'widgets');
    mkdirSync(state);
    mkdirSync(repo);
    const config = {
      ...fakeEngineConfig(state),
      dataDir: 'data',
      webhook: { secret: SECRET },
      repos: { 'acme/widgets': { path: repo } },
    };
    writeFileSync(join(root, 'config.yaml'), stringify(config));
    env = { THE_LOOP_CONFIG: join(root, 'config.yaml') };
    daemon = await startDaemonProcess({ cwd: root, env });

    // A hostile action (routed as "not routed"), a hostile comment that runs a turn, a hostile
    // repository name (rejected), a hostile login without a mention (ignored).
    const action = fixture('issues.opened');
    action.action = `opened${HOSTILE}`;
    const comment = fixture('issue_comment.created') as {
      issue: { title: string };
      comment: { body: string; user: { login: string } };
    };
    comment.issue.title = `Title ${HOSTILE}`;
    comment.comment.body = `@the-loop mode:escapes ${HOSTILE}`;
    const repoName = fixture('issue_comment.created') as { repository: { full_name: string } };
    repoName.repository.full_name = `acme/wid${HOSTILE}gets`;
    const login = fixture('issue_comment.created') as { comment: { body: string; user: { login: string } } };
    login.comment.body = 'no mention here';
    login.comment.user.login = `octo${HOSTILE}cat`;
    for (const [name, event, payload] of [
      ['action', 'issues', action],
      ['comment', 'issue_comment', comment],
      ['repo', 'issue_comment', repoName],
      ['login', 'issue_comment', login],
    ] as const) {
      const res = await sendDelivery(daemon.webhookUrl, SECRET, event, payload);
      expect(res.status).toBe(202);
      ids[name] = res.id;
    }
    for (const id of Object.values(ids)) {
      for (let i = 0; ; i++) {
        const shown = JSON.parse((await run(['events', 'show', id, '--json'])).stdout.toString('utf8'));
        if (!['queued', 'running'].includes(shown.delivery.status)) break;
        if (i > 600) throw new Error(`delivery ${id} did not settle`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }, 120_000);

  afterAll(async () => {
    await daemon?.stop();
    if (root) rmSync(root, { recursive: true, force: true });
  });

  it('events list and events show: the action without its escape sequences or their tails', async () => {
    const list = await run(['events', 'list']);
    expect(list.code).toBe(0);
    const text = expectClean(list.stdout, 'events list');
    const row = text.split('\n').find((line) => line.includes(ids.action as string)) ?? '';
    expect(row).toMatch(
      / issues\.opened +ignored +ignore +github:acme\/widgets#15 +issues\.opened +is not routed$/,
    );
    for (const tail of ['pwned', '[2J', '31m', 'dcs']) expect(row).not.toContain(tail);
    // The columns line up: widths are those of what is printed.
    const [header] = text.split('\n');
    expect(row.indexOf('ignored')).toBe(header?.indexOf('STATUS'));

    const shown = await run(['events', 'show', ids.action as string, '--body']);
    expect(shown.code).toBe(0);
    const show = expectClean(shown.stdout, 'events show');
    // The event line shows the action without its sequences; the body, as JSON, spells them out.
    expect(show).toMatch(/^ {2}event {6}issues\.opened \(github\)$/m);
    expect(show).toContain('"action": "opened\\u001b]0;pwned\\u0007\\u001b[2J\\u009b31m');
  });

  it('events --json: escaped, and the values are the payload’s own', async () => {
    const list = await run(['events', 'list', '--json']);
    const rows = JSON.parse(expectClean(list.stdout, 'events list --json')) as {
      id: string;
      action: string;
    }[];
    expect(rows.find((r) => r.id === ids.action)?.action).toBe(`opened${HOSTILE}`.slice(0, 64));
    const shown = await run(['events', 'show', ids.comment as string, '--json', '--body']);
    const json = expectClean(shown.stdout, 'events show --json');
    expect(json).toContain('\\u001b]0;pwned');
    const parsed = JSON.parse(json) as { body: { comment: { body: string } }; delivery: { status: string } };
    expect(parsed.body.comment.body).toBe(`@the-loop mode:escapes ${HOSTILE}`);
    expect(parsed.delivery.status).toBe('done');
  });

  it('every other command, in text and in JSON, with the hostile session, turn, acts and rows', async () => {
    const commands = [
      ['events', 'show', ids.comment as string, '--body'],
      ['events', 'show', ids.repo as string],
      ['events', 'show', ids.login as string, '--body'],
      ['sessions', 'list'],
      ['sessions', 'list', '--json'],
      ['sessions', 'show', WI],
      ['sessions', 'show', WI, '--json'],
      ['sessions', 'logs', WI],
      ['sessions', 'logs', WI, '--json'],
      ['acts'],
      ['acts', '--json'],
      ['usage'],
      ['usage', '--json'],
      ['usage', '--by', 'model'],
      ['doctor'],
      ['run', 'github:acme/widgets#77', 'mode:escapes'],
      ['run', 'github:acme/widgets#78', 'mode:escapes', '--json'],
    ];
    const seen: string[] = [];
    for (const args of commands) {
      const res = await run(args);
      seen.push(expectClean(res.stdout, args.join(' ')));
      expectClean(res.stderr, `${args.join(' ')} (stderr)`);
    }
    const all = seen.join('\n');
    // The hostile text did reach these commands: its printable parts are there, its controls not.
    expect(all).toContain('mode:escapes');
    expect(all).toContain('red');
    expect(all).toContain('\\u001b[31mred');
    expect(all).not.toContain('pwned\u0007');
  });
});
