import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseWorkItem, workItemSlug } from '../../src/core/work-item.js';
import { runtimeDirOf } from '../../src/os/runtime-dir.js';
import { keysSocketPath } from '../../src/runners/process/keys-socket.js';
import { fakeEngineConfig, makeProject, runCli } from '../helpers/cli.js';

const WI = 'github:octo/widgets#21';
const PLAIN_WI = 'github:octo/widgets#22';
const SLUG = workItemSlug(parseWorkItem(WI));

describe('pty engines through the CLI (fake engine, real PTY, real processes)', () => {
  let project: ReturnType<typeof makeProject>;
  // Where the CLI (its environment has no TMPDIR) finds the keys socket: the default runtime directory.
  let socket: string;
  beforeAll(() => {
    project = makeProject();
    socket = keysSocketPath(runtimeDirOf({}, join(project.dir, '.the-loop')), SLUG);
    const stateDir = join(project.dir, 'engine-state');
    mkdirSync(stateDir);
    // `fake` runs on a PTY (set in config: engines are data); `plain` is the same engine on pipes.
    const config = fakeEngineConfig(stateDir, { pty: true });
    const engines = config.engines as Record<string, Record<string, unknown>>;
    engines.plain = { ...engines.fake, pty: false };
    writeFileSync(project.configPath, JSON.stringify(config));
  });
  afterAll(() => project.cleanup());

  const cli = (args: string[]) => runCli(args, { cwd: project.dir });

  it('runs a turn of a pty engine configured in config.yaml', async () => {
    const res = await cli(['run', WI, 'mode:tty']);
    expect(res.stderr).toBe('');
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/new session .* fake on process/);
    expect(res.stdout).toMatch(/stdin tty: true, stdout tty: true, size: 200x50/);
    expect(res.stdout).toMatch(/✔ turn 1 succeeded · ended by result/);
  });

  it('presses keys in the running turn, and says when no turn runs', async () => {
    const idle = await cli(['sessions', 'keys', WI, 'Escape']);
    expect(idle.code).toBe(1);
    expect(idle.stderr).toMatch(
      /no turn of github:octo\/widgets#21 is running: keys reach a pty engine only while its turn runs/,
    );

    const turn = cli(['run', WI, 'mode:wait-keys']);
    // Wait until the engine's terminal is in raw mode (it says "ready"), so nothing is echoed.
    let ready = false;
    for (let i = 0; i < 100 && !ready; i++) {
      const logs = await cli(['sessions', 'logs', WI, '--turn', '2', '--json']);
      ready = existsSync(socket) && logs.stdout.includes('"ready"');
      if (!ready) await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(ready).toBe(true);
    const typed = await cli(['sessions', 'keys', WI, 'hi', '--json', 'Enter']);
    expect(typed.stderr).toBe('');
    expect(typed.code).toBe(0);
    expect(JSON.parse(typed.stdout)).toEqual({
      target: `${SLUG} (pty)`,
      sent: [
        { key: 'hi', literal: true },
        { key: 'Enter', literal: false },
      ],
    });
    const pressed = await cli(['sessions', 'keys', WI, 'Escape']);
    expect(pressed.code).toBe(0);
    expect(pressed.stdout).toBe(`sent to ${SLUG} (pty): Escape\n`);

    const done = await turn;
    expect(done.code).toBe(0);
    expect(done.stdout).toContain(`all:${Buffer.from('hi\r\x1b').toString('hex')}`);
    expect(done.stdout).toMatch(/✔ turn 2 succeeded · ended by result/);
    expect(existsSync(socket)).toBe(false);
    // Nothing is left in the shared /tmp: the data dir's runtime directory went with its last socket.
    expect(existsSync(dirname(socket))).toBe(false);
  });

  it('refuses keys for a process session whose engine is not on a PTY, saying how', async () => {
    const run = await cli(['run', PLAIN_WI, '--engine', 'plain', 'hello']);
    expect(run.code).toBe(0);
    const res = await cli(['sessions', 'keys', PLAIN_WI, 'Escape']);
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/runs on the process runner: its engine has no terminal to type into/);
    expect(res.stderr).toMatch(/--runner tmux/);
    expect(res.stderr).toMatch(/pty: true/);
  });
});
