import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject, runCli } from '../../helpers/cli.js';
import { call, type McpHandle, privateTmux, startMcp } from '../../helpers/mcp.js';

/**
 * Each grant dimension refuses outside its bounds, through the SDK's client over stdio against real
 * tmux: scope, tools, backends, targets (prefix, single — after a rename or a re-creation of the bound
 * terminal too), run limits; and a connection that asks for more than its operator's ceiling does
 * not start.
 */

const tmux = privateTmux();
let project: ReturnType<typeof makeProject>;
const open: McpHandle[] = [];

async function connect(args: string[]): Promise<McpHandle> {
  const handle = await startMcp({ cwd: project.dir, args });
  open.push(handle);
  return handle;
}

beforeAll(async () => {
  for (const name of ['loop-a', 'loop-a-b', 'loop-b']) await tmux.session(name);
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: {
      operators: {
        reader: { scope: 'read', targets: 'any' },
        typist: {
          scope: 'write',
          targets: { prefixes: ['loop-a'] },
          tools: ['list_terminals', 'read_terminal', 'send_input'],
        },
        bound: { scope: 'destroy', targets: { single: 'loop-a' }, run: { timeoutSeconds: 10 } },
        runner: { scope: 'write', targets: { prefixes: ['loop-'] }, run: { timeoutSeconds: 10 } },
      },
    },
  });
}, 30_000);

afterAll(async () => {
  for (const handle of open) await handle.close();
  await tmux.stop();
  project?.cleanup();
});

describe('scope and tools', () => {
  it('a read grant reads and refuses every write', async () => {
    const reader = await connect(['--operator', 'reader']);
    expect((await call(reader.client, 'read_terminal', { target: 'loop-b' })).isError).toBe(false);
    expect((await call(reader.client, 'send_input', { target: 'loop-b', text: 'x' })).code).toBe('E_SCOPE');
    expect((await call(reader.client, 'run_command', { target: 'loop-b', command: 'true' })).code).toBe(
      'E_SCOPE',
    );
    expect((await call(reader.client, 'close_terminal', { target: 'loop-b' })).code).toBe('E_SCOPE');
  });

  it('a tool left out of the grant is refused even within its scope', async () => {
    const typist = await connect(['--operator', 'typist']);
    expect((await call(typist.client, 'send_input', { target: 'loop-a', keys: ['C-u'] })).isError).toBe(
      false,
    );
    const run = await call(typist.client, 'run_command', { target: 'loop-a', command: 'true' });
    expect(run.code).toBe('E_SCOPE');
    expect(run.text).toContain('run_command');
  });

  it('a backend outside the grant is refused', async () => {
    const reader = await connect(['--operator', 'reader']);
    expect((await call(reader.client, 'read_terminal', { target: 'kitty:1' })).code).toBe('E_SCOPE');
    expect((await call(reader.client, 'list_terminals', { backend: 'kitty' })).code).toBe('E_SCOPE');
  });
});

describe('targets', () => {
  it('a prefix reaches the names that start with it, and nothing else', async () => {
    const typist = await connect(['--operator', 'typist']);
    const listed = await call(typist.client, 'list_terminals', {});
    const terminals = (listed.structured?.terminals ?? []) as Array<{ name: string }>;
    const names = terminals.map((t) => t.name).sort();
    expect(names).toEqual(['loop-a', 'loop-a-b']);
    expect((await call(typist.client, 'read_terminal', { target: 'loop-a-b' })).isError).toBe(false);
    expect((await call(typist.client, 'read_terminal', { target: 'loop-b' })).code).toBe(
      'E_TARGET_NOT_BOUND',
    );
    // A look-alike hyphen (U+2010) is another name: not found, never matched to loop-a.
    expect((await call(typist.client, 'read_terminal', { target: 'loop\u2010a' })).code).toBe(
      'E_TARGET_NOT_FOUND',
    );
  });

  it('a single grant reaches its terminal only: not a longer name, not after a rename or a re-creation', async () => {
    await tmux.session('loop-single');
    const project2 = makeProject({
      tmux: { socket: tmux.socket },
      connector: { operators: { one: { scope: 'write', targets: { single: 'loop-single' } } } },
    });
    try {
      await tmux.session('loop-single-b');
      const one = await startMcp({ cwd: project2.dir });
      open.push(one);
      expect((await call(one.client, 'read_terminal', { target: 'loop-single' })).isError).toBe(false);
      expect((await call(one.client, 'read_terminal', { target: 'loop-single-b' })).code).toBe(
        'E_TARGET_NOT_BOUND',
      );
      // Renamed: the bound terminal under another name is refused, and its old name is no one's.
      await tmux.tmux.must(['rename-session', '-t', '=loop-single', 'loop-renamed'], 'rename');
      expect((await call(one.client, 'read_terminal', { target: 'loop-renamed' })).code).toBe(
        'E_TARGET_NOT_BOUND',
      );
      expect((await call(one.client, 'read_terminal', { target: 'loop-single' })).code).toBe(
        'E_TARGET_NOT_FOUND',
      );
      // Another terminal given the bound name does not inherit the grant.
      await tmux.tmux.must(['rename-session', '-t', '=loop-single-b', 'loop-single'], 'rename');
      const impostor = await call(one.client, 'send_input', { target: 'loop-single', text: 'x' });
      expect(impostor.code).toBe('E_TARGET_NOT_BOUND');
      // Killed and re-created under the same name: another terminal too.
      await tmux.tmux.must(['kill-session', '-t', '=loop-single'], 'kill');
      await tmux.session('loop-single');
      const recreated = await call(one.client, 'send_input', { target: 'loop-single', text: 'x' });
      expect(recreated.code).toBe('E_TARGET_NOT_BOUND');
      expect(recreated.text).toMatch(/re-created|another/);
      expect((await call(one.client, 'list_terminals', {})).structured?.terminals).toEqual([]);
    } finally {
      project2.cleanup();
    }
  });

  it('a single grant whose terminal does not exist refuses to start', async () => {
    const project3 = makeProject({
      tmux: { socket: tmux.socket },
      connector: { operators: { one: { scope: 'read', targets: { single: 'loop-nowhere' } } } },
    });
    try {
      await expect(startMcp({ cwd: project3.dir })).rejects.toThrow(/loop-nowhere/);
    } finally {
      project3.cleanup();
    }
  });
});

describe('run limits', () => {
  it('refuses a timeout beyond the grant, and beyond what the connection narrowed it to', async () => {
    const runner = await connect(['--operator', 'runner', '--timeout', '5']);
    expect(
      (await call(runner.client, 'run_command', { target: 'loop-b', command: 'true', timeoutSeconds: 5 }))
        .isError,
    ).toBe(false);
    expect(
      (await call(runner.client, 'run_command', { target: 'loop-b', command: 'true', timeoutSeconds: 6 }))
        .code,
    ).toBe('E_SCOPE');
    const inPane = await call(runner.client, 'run_command', {
      target: 'loop-b',
      command: 'true',
      where: 'pane',
    });
    expect(inPane.code).toBe('E_SCOPE');
  });
});

describe('narrowing a connection', () => {
  it('starts with less than the ceiling and holds to it', async () => {
    const narrow = await connect(['--operator', 'runner', '--prefix', 'loop-a-', '--scope', 'read']);
    expect((await call(narrow.client, 'read_terminal', { target: 'loop-a-b' })).isError).toBe(false);
    expect((await call(narrow.client, 'read_terminal', { target: 'loop-a' })).code).toBe(
      'E_TARGET_NOT_BOUND',
    );
    expect((await call(narrow.client, 'send_input', { target: 'loop-a-b', text: 'x' })).code).toBe('E_SCOPE');
  });

  it.each([
    [['--operator', 'reader', '--scope', 'write'], /scope/],
    [['--operator', 'typist', '--prefix', 'loop-'], /targets/],
    [['--operator', 'typist', '--tools', 'run_command'], /run_command/],
    [['--operator', 'reader', '--backend', 'kitty'], /kitty/],
    [['--operator', 'bound', '--target', 'loop-b'], /targets/],
    [['--operator', 'runner', '--timeout', '11'], /timeout/i],
    [['--operator', 'nobody'], /nobody/],
    [[], /several operators/],
  ])('refuses to start when asked for more: %j', async (args, why) => {
    const result = await runCli(['mcp', ...args], { cwd: project.dir, timeoutMs: 30_000 });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(why);
    expect(result.stdout).toBe('');
  });
});
