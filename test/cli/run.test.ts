import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeEngineConfig, makeProject, runCli } from '../helpers/cli.js';

const WI = 'github:octo/widgets#15';

describe('the-loop run (fake engine, real processes, real SQLite)', () => {
  let project: ReturnType<typeof makeProject>;
  let stateDir: string;
  beforeAll(() => {
    project = makeProject();
    stateDir = join(project.dir, 'engine-state');
    mkdirSync(stateDir);
    writeFileSync(project.configPath, JSON.stringify(fakeEngineConfig(stateDir)));
  });
  afterAll(() => project.cleanup());

  const cli = (args: string[], env: Record<string, string> = {}) => runCli(args, { cwd: project.dir, env });

  it('creates the session on the first turn and resumes it on the second', async () => {
    const first = await cli(['run', WI, 'hello there']);
    expect(first.stderr).toBe('');
    expect(first.code).toBe(0);
    expect(first.stdout).toMatch(/new session .* fake on process/);
    expect(first.stdout).toMatch(/turn 1; I remember: nothing/);
    expect(first.stdout).toMatch(
      /✔ turn 1 succeeded · ended by result · .* · 112 tokens \(100 in, 7 out, 3 cache read, 2 cache write\) · ~0\.10¢/,
    );

    const second = await cli(['run', WI, 'and again']);
    expect(second.code).toBe(0);
    expect(second.stdout).toMatch(/turn 2; I remember: hello there/);

    const list = JSON.parse((await cli(['sessions', 'list', '--json'])).stdout) as Array<
      Record<string, unknown>
    >;
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({
      workItem: WI,
      engine: 'fake',
      runner: 'process',
      status: 'active',
      turns: 2,
    });

    const show = JSON.parse((await cli(['sessions', 'show', WI, '--json'])).stdout) as {
      turns: Array<{ seq: number; status: string; endReason: string; usage: { inputTokens: number } }>;
      session: { engineSessionId: string; engineSessionStarted: boolean };
    };
    expect(show.turns.map((t) => [t.seq, t.status, t.endReason, t.usage.inputTokens])).toEqual([
      [1, 'succeeded', 'result', 100],
      [2, 'succeeded', 'result', 200],
    ]);
    expect(show.session.engineSessionStarted).toBe(true);
    expect(existsSync(join(stateDir, `${show.session.engineSessionId}.json`))).toBe(true);

    const logs = (await cli(['sessions', 'logs', WI, '--turn', '2'])).stdout;
    expect(logs).toMatch(/── turn 2 .* succeeded \(result\)/);
    expect(logs).toMatch(/I remember: hello there/);
  });

  it('emits JSON lines with --json', async () => {
    const res = await cli(['run', WI, '--json', 'mode:tool do it']);
    const lines = res.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; event?: { type: string } });
    expect(lines[0]?.type).toBe('session');
    expect(lines.at(-1)?.type).toBe('turn');
    expect(lines.filter((l) => l.type === 'event').map((l) => l.event?.type)).toEqual([
      'session',
      'tool-use',
      'tool-result',
      'text',
      'usage',
      'turn-end',
    ]);
  });

  it('records a crashed turn as failed, keeps the session, and the next turn still works', async () => {
    const crash = await cli(['run', WI, 'mode:crash']);
    expect(crash.code).toBe(1);
    expect(crash.stdout).toMatch(/✖ turn \d+ failed · ended by error/);
    expect(crash.stdout).toMatch(/simulated crash/);
    const after = await cli(['run', WI, 'still alive?']);
    expect(after.code).toBe(0);
    const show = JSON.parse((await cli(['sessions', 'show', WI, '--json'])).stdout) as {
      turns: Array<{ status: string; usage: unknown }>;
    };
    const failed = show.turns.filter((t) => t.status === 'failed');
    expect(failed).toHaveLength(1);
    // Nothing measured is unknown, never zero.
    expect(failed[0]?.usage).toBeNull();
  });

  it('does not exit before the turn is recorded when the engine leaves a child behind', async () => {
    const pidFile = join(project.dir, 'grandchild.pid');
    const res = await cli(['run', WI, 'mode:grandchild'], { FAKE_ENGINE_CHILD_PID_FILE: pidFile });
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/✔ turn \d+ succeeded · ended by result/);
    const child = Number(readFileSync(pidFile, 'utf8'));
    expect(() => process.kill(child, 0)).toThrow();
    const show = JSON.parse((await cli(['sessions', 'show', WI, '--json'])).stdout) as {
      turns: Array<{ status: string }>;
    };
    expect(show.turns.every((t) => t.status !== 'running')).toBe(true);
  });

  it('closes a session, keeps its history, and starts a new one on the next turn', async () => {
    const close = await cli(['sessions', 'close', WI]);
    expect(close.code).toBe(0);
    expect(close.stdout).toMatch(/closed/);
    expect((await cli(['sessions', 'close', WI])).stdout).toMatch(/already closed/);
    expect(JSON.parse((await cli(['sessions', 'list', '--json'])).stdout)).toEqual([]);
    const fresh = await cli(['run', WI, 'new start']);
    expect(fresh.stdout).toMatch(/new session/);
    expect(fresh.stdout).toMatch(/I remember: nothing/);
    const all = JSON.parse((await cli(['sessions', 'list', '--all', '--json'])).stdout) as Array<{
      status: string;
    }>;
    expect(all.map((s) => s.status).sort()).toEqual(['active', 'closed']);
  });

  it('refuses keys for a session without a terminal, saying why', async () => {
    const res = await cli(['sessions', 'keys', WI, 'Escape']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/runs on the process runner: its engine has no terminal/);
    expect(res.stderr).toMatch(/--runner tmux/);
  });

  it('keeps the registry consistent: one active session per work item, turns one at a time', () => {
    const db = new Database(join(project.dir, '.the-loop/the-loop.db'), { readonly: true });
    const active = db
      .prepare("SELECT work_item, COUNT(*) n FROM sessions WHERE status = 'active' GROUP BY work_item")
      .all() as {
      n: number;
    }[];
    expect(active.every((r) => r.n === 1)).toBe(true);
    expect(
      (db.prepare("SELECT COUNT(*) n FROM turns WHERE status = 'running'").get() as { n: number }).n,
    ).toBe(0);
    db.close();
  });
});

describe('the-loop run: bad input is a clear error and changes nothing', () => {
  let project: ReturnType<typeof makeProject>;
  beforeAll(() => {
    project = makeProject();
    writeFileSync(project.configPath, JSON.stringify(fakeEngineConfig(join(project.dir, 'state'))));
  });
  afterAll(() => project.cleanup());
  const cli = (args: string[]) => runCli(args, { cwd: project.dir });

  const sessionsInDb = () => {
    const path = join(project.dir, '.the-loop/the-loop.db');
    if (!existsSync(path)) return 0;
    const db = new Database(path, { readonly: true });
    const n = (db.prepare('SELECT COUNT(*) n FROM sessions').get() as { n: number }).n;
    db.close();
    return n;
  };

  it.each([
    [['run', 'octo/widgets#1', 'x'], /not a work item/, /github:<owner>\/<repo>#<number>/],
    [['run', 'github:octo/../etc#1', 'x'], /not a work item/, /github:/],
    [['run', 'github:octo/..#1', 'x'], /invalid GitHub repository name/, /github:/],
    [['run', 'github:-bad/repo#1', 'x'], /invalid GitHub owner/, /github:/],
    [['run', 'github:o/r#0', 'x'], /invalid issue\/PR number/, /github:/],
    [['run', 'github:o/r#1', '--engine', 'nope', 'x'], /unknown engine "nope"/, /Known engines: .*claude/],
    [
      ['run', 'github:o/r#1', '--engine', 'codex', '--cwd', '/definitely/not/here', 'x'],
      /working directory does not exist/,
      /--cwd/,
    ],
    [['run', 'github:o/r#1', '--runner', 'screen', 'x'], /Allowed choices are process, tmux/, /--help/],
    [
      ['run', 'github:o/r#1', '--engine', 'codex', '--runner', 'tmux', 'x'],
      /the codex engine cannot run in tmux/,
      /Use --runner process/,
    ],
    [['run', 'github:o/r#1', '   '], /no prompt given/, /the-loop run/],
  ])('%j', async (args, message, hint) => {
    const res = await cli(args);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(message);
    expect(res.stderr).toMatch(hint);
    expect(res.stdout).toBe('');
    expect(sessionsInDb()).toBe(0);
  });

  it('reports a missing engine binary with how to install it, and creates no session', async () => {
    const res = await runCli(['run', 'github:o/r#1', '--engine', 'codex', 'x'], {
      cwd: project.dir,
      env: { PATH: '/nonexistent' },
    });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/binary "codex" was not found on PATH/);
    expect(res.stderr).toMatch(/npm install -g @openai\/codex/);
    expect(sessionsInDb()).toBe(0);
  });

  it('rejects a prompt over one argv element (120 KiB) without starting anything', async () => {
    const big = join(project.dir, 'big.txt');
    writeFileSync(big, 'ü'.repeat(61_441));
    const res = await cli(['run', 'github:o/r#2', '--prompt-file', big]);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/the prompt is 122882 bytes; the limit is 122880/);
    expect(res.stderr).toMatch(/Put long context in a file/);
  });

  it('reads the prompt from stdin with --prompt-file -', async () => {
    const res = await runCli(['run', 'github:o/r#3', '--prompt-file', '-'], {
      cwd: project.dir,
      input: 'from stdin\n',
    });
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/turn 1 succeeded/);
  });

  it('names the key path of an invalid config', async () => {
    writeFileSync(
      join(project.dir, 'bad.yaml'),
      'defaults:\n  backstopSeconds: soon\nengines:\n  claude:\n    binary: 42\n',
    );
    const res = await cli(['--config', 'bad.yaml', 'run', 'github:o/r#1', 'x']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/defaults\.backstopSeconds: Invalid input: expected number, received string/);
    expect(res.stderr).toMatch(/engines\.claude\.binary: Invalid input: expected string, received number/);
    expect(res.stderr).toMatch(/the-loop config schema/);
  });

  it('lists sessions of an empty registry helpfully', async () => {
    const res = await cli(['sessions', 'show', 'github:o/r#404']);
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/no session for github:o\/r#404/);
    expect(readdirSync(project.dir)).toContain('.the-loop');
  });

  it('refuses a config path that does not exist', async () => {
    const res = await cli(['--config', 'missing.yaml', 'sessions', 'list']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/config file not found: .*missing\.yaml/);
    expect(res.stderr).toMatch(/the-loop config init/);
  });

  it('keeps prompts with terminal escapes out of the readable output', async () => {
    const res = await cli(['run', 'github:o/r#4', 'hello \u001b]0;pwned\u0007 \u001b[31mred']);
    expect(res.code).toBe(0);
    expect(res.stdout).not.toMatch(/\u001b/);
    expect(readFileSync(join(project.dir, '.the-loop/the-loop.log'), 'utf8')).not.toMatch(/pwned/);
  });
});
