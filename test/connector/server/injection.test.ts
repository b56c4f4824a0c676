import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject } from '../../helpers/cli.js';
import { call, type McpHandle, privateTmux, startMcp } from '../../helpers/mcp.js';

/**
 * The injection corpus in every string argument of every tool, against a grant bound to one tmux
 * session: nothing runs (a canary file is never created), nothing reaches another terminal (their
 * screens are unchanged), and each call is refused or contained with a clear result.
 */

const tmux = privateTmux();
const work = mkdtempSync(join(tmpdir(), 'the-loop-mcp-inject-'));
const canary = join(work, 'canary');
let project: ReturnType<typeof makeProject>;
let mcp: McpHandle;

const touch = `touch ${canary}`;
const CORPUS = [
  `'; ${touch}; '`,
  `"; ${touch}; "`,
  `$(${touch})`,
  `\`${touch}\``,
  `; ${touch}`,
  `\n${touch}\n`,
  `\r${touch}\r`,
  `\u001b[201~${touch}\n`,
  `\u001b[200~${touch}\u001b[201~\r`,
  `#{pane_id} #(${touch})`,
  `#(${touch})`,
  `%1`,
  `=loop-bound`,
  `loop-bound:0.0`,
  `loop\u2010bound`,
  `ｌoop-bound`,
  `loop-bound\u0000`,
  `*`,
  'x'.repeat(1024 * 1024),
];

async function screens(): Promise<string[]> {
  return Promise.all(['loop-bound-b', 'loop-other'].map((s) => tmux.capture(s)));
}

beforeAll(async () => {
  for (const name of ['loop-bound', 'loop-bound-b', 'loop-other']) await tmux.session(name);
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: {
      operators: {
        ops: {
          scope: 'destroy',
          targets: { single: 'loop-bound' },
          run: { timeoutSeconds: 10, inPane: true },
        },
      },
    },
  });
  mcp = await startMcp({ cwd: project.dir });
}, 30_000);

afterAll(async () => {
  await mcp?.close();
  await tmux.stop();
  project?.cleanup();
  rmSync(work, { recursive: true, force: true });
});

describe('the injection corpus', () => {
  it('in every target argument: refused, nothing run, nothing sent anywhere', async () => {
    const before = await screens();
    const bound = await tmux.capture('loop-bound');
    for (const target of CORPUS) {
      for (const [tool, args] of [
        ['read_terminal', { target }],
        ['send_input', { target, text: 'echo hi' }],
        ['run_command', { target, command: 'true' }],
        ['close_terminal', { target }],
      ] as const) {
        const result = await call(mcp.client, tool, args);
        expect(result.isError, `${tool} ${JSON.stringify(target).slice(0, 60)}`).toBe(true);
      }
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(canary)).toBe(false);
    expect(await screens()).toEqual(before);
    expect(await tmux.capture('loop-bound')).toBe(bound);
    expect((await tmux.tmux.run(['has-session', '-t', '=loop-bound'])).ok).toBe(true);
  });

  it('as text: pasted inert into the bound shell (never run, never past the paste), only there', async () => {
    const before = await screens();
    for (const text of CORPUS) {
      const result = await call(mcp.client, 'send_input', { target: 'loop-bound', text });
      if (text.length > 64 * 1024) {
        expect(result.isError).toBe(true);
        continue;
      }
      // Whatever was pasted sits on the command line; C-c discards it without running it.
      await call(mcp.client, 'send_input', { target: 'loop-bound', keys: ['C-c'] });
    }
    // Under the character limit but over 64 KiB of UTF-8: refused, never cut (a cut text would end in
    // a note and a newline, and the newline would run the line).
    const wide = await call(mcp.client, 'send_input', {
      target: 'loop-bound',
      text: `${touch} #${'é'.repeat(40_000)}`,
    });
    expect(wide.isError).toBe(true);
    expect(wide.code).toBe('E_INVALID');
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(canary)).toBe(false);
    // The pastes did arrive: a last one shows on the bound shell's command line, unrun.
    await call(mcp.client, 'send_input', {
      target: 'loop-bound',
      text: `echo pasted-$((40+2)) $(${touch})\n`,
    });
    let screen = '';
    for (let i = 0; i < 30 && !screen.includes('echo pasted-$((40+2))'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      screen = await tmux.capture('loop-bound');
    }
    expect(screen).toContain(`echo pasted-$((40+2)) $(${touch})`);
    expect(screen).not.toContain('pasted-42');
    await call(mcp.client, 'send_input', { target: 'loop-bound', keys: ['C-c'] });
    await new Promise((r) => setTimeout(r, 500));
    expect(existsSync(canary)).toBe(false);
    expect(await screens()).toEqual(before);
  });

  it('as keys: every one refused (never typed), nothing sent', async () => {
    const bound = await tmux.capture('loop-bound');
    for (const key of [
      ...CORPUS.slice(0, -1).map((k) => k.slice(0, 32)),
      'NotAKey',
      'C-',
      'c-c',
      'Enter ',
      'C-C-c',
      'F13',
    ]) {
      const result = await call(mcp.client, 'send_input', { target: 'loop-bound', keys: [key] });
      expect(result.isError, JSON.stringify(key)).toBe(true);
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(existsSync(canary)).toBe(false);
    expect(await tmux.capture('loop-bound')).toBe(bound);
  });

  it('in list_terminals and the numeric arguments: refused by the schema', async () => {
    for (const backend of CORPUS.slice(0, 6))
      expect((await call(mcp.client, 'list_terminals', { backend })).isError).toBe(true);
    for (const lines of ['1; touch x', -1, 1e9, 1.5])
      expect((await call(mcp.client, 'read_terminal', { target: 'loop-bound', lines })).isError).toBe(true);
    for (const where of ['here', `pane; ${touch}`])
      expect(
        (await call(mcp.client, 'run_command', { target: 'loop-bound', command: 'true', where })).isError,
      ).toBe(true);
    const extra = await call(mcp.client, 'read_terminal', {
      target: 'loop-bound',
      socket: 'other',
      '-t': '%1',
    });
    expect(extra.isError).toBe(true);
    expect(existsSync(canary)).toBe(false);
  });

  it('as a command: run by the shell in the bound session only, with tmux formats left as text', async () => {
    const before = await screens();
    const formats = await call(mcp.client, 'run_command', {
      target: 'loop-bound',
      command: `printf '%s\\n' '#(${touch})' '#{pane_id}' "#{session_name}"`,
    });
    expect(formats.isError, formats.text).toBe(false);
    expect(formats.structured?.output).toContain(`#(${touch})`);
    expect(formats.structured?.output).toContain('#{pane_id}');
    expect(formats.structured?.output).toContain('#{session_name}');
    const escapes = await call(mcp.client, 'run_command', {
      target: 'loop-bound',
      command: 'printf "a\\033]0;t\\007b\\n"',
    });
    expect(escapes.structured?.output).not.toMatch(/\u001b/);
    const huge = await call(mcp.client, 'run_command', {
      target: 'loop-bound',
      command: 'x'.repeat(1024 * 1024),
    });
    expect(huge.isError).toBe(true);
    expect(existsSync(canary)).toBe(false);
    expect(await screens()).toEqual(before);
  });
});
