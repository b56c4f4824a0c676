import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canaryFormsIn } from '../../helpers/canary.js';
import { makeProject } from '../../helpers/cli.js';
import { kittySkipReason, startKitty, type TestKitty } from '../../helpers/kitty.js';
import { call, type McpHandle, startMcp } from '../../helpers/mcp.js';

/**
 * `the-loop mcp` on a real kitty under Xvfb, through the SDK's stdio client: list, read, send and run
 * with the target resolved to a window id; a target that matches nothing is an error (kitty's own
 * `send-text --match` would exit 0); kitty not running is E_BACKEND_UNAVAILABLE.
 */

const skip = kittySkipReason();
const CANARY = `kitty-mcp-canary-${Date.now().toString(36)}9f3a`;
let kitty: TestKitty;
let project: ReturnType<typeof makeProject>;
let mcp: McpHandle;
const seen: string[] = [];

async function keep(name: string, args: Record<string, unknown>) {
  const result = await call(mcp.client, name, args);
  seen.push(JSON.stringify(result));
  return result;
}

describe.skipIf(skip !== null)(`the connector on kitty${skip ? `: ${skip}` : ''}`, () => {
  beforeAll(async () => {
    kitty = await startKitty(['bash', '--norc', '--noprofile'], { THE_LOOP_KITTY_CANARY: CANARY });
    project = makeProject({
      connector: {
        kitty: { to: kitty.to },
        operators: {
          kops: { backends: ['kitty'], scope: 'write', targets: 'any', run: { timeoutSeconds: 10 } },
          gone: { backends: ['kitty'], scope: 'read', targets: 'any' },
        },
      },
    });
    mcp = await startMcp({ cwd: project.dir, args: ['--operator', 'kops'] });
  }, 60_000);

  afterAll(async () => {
    await mcp?.close();
    await kitty?.stop();
    project?.cleanup();
  });

  it('lists, reads, sends and runs on a window resolved to its id', async () => {
    const listed = await keep('list_terminals', {});
    const terminals = (listed.structured?.terminals ?? []) as Array<{ id: string; backend: string }>;
    expect(terminals.length).toBeGreaterThan(0);
    const id = terminals[0]?.id as string;
    expect(id).toMatch(/^kitty:\d+$/);
    const sent = await keep('send_input', { target: id, text: 'echo kitty-$((6*7))', keys: ['Enter'] });
    expect(sent.isError, sent.text).toBe(false);
    let lines: string[] = [];
    for (let i = 0; i < 50 && !lines.includes('kitty-42'); i++) {
      lines = ((await keep('read_terminal', { target: id, lines: 30 })).structured?.lines ?? []) as string[];
      if (!lines.includes('kitty-42')) await new Promise((r) => setTimeout(r, 200));
    }
    expect(lines).toContain('kitty-42');
    const run = await keep('run_command', { target: id, command: 'echo hi; exit 3' });
    expect(run.isError, run.text).toBe(false);
    expect(run.structured).toMatchObject({ exitStatus: 3 });
    expect(String(run.structured?.output)).toContain('hi');
    const newline = await keep('send_input', { target: id, text: 'echo a\ntouch x' });
    expect(newline.code).toBe('E_INVALID');
  }, 60_000);

  it('refuses a target that matches nothing', async () => {
    expect((await keep('read_terminal', { target: 'kitty:99999' })).code).toBe('E_TARGET_NOT_FOUND');
    expect((await keep('send_input', { target: 'no such title', text: 'x' })).code).toBe(
      'E_TARGET_NOT_FOUND',
    );
    expect((await keep('send_input', { target: '%1', text: 'x' })).isError).toBe(true);
  });

  it('returns no environment', () => {
    for (const text of seen) expect(canaryFormsIn(text, CANARY)).toEqual([]);
  });

  it('says kitty is unavailable when it is not running', async () => {
    const project2 = makeProject({
      connector: {
        kitty: { to: `unix:${join(kitty.dir, 'no-such.sock')}` },
        operators: { gone: { backends: ['kitty'], scope: 'read', targets: 'any' } },
      },
    });
    const down = await startMcp({ cwd: project2.dir });
    try {
      const listed = await call(down.client, 'list_terminals', {});
      expect(listed.structured?.terminals).toEqual([]);
      expect(listed.structured?.unavailable).toMatchObject([{ backend: 'kitty' }]);
      expect((await call(down.client, 'read_terminal', { target: 'kitty:1' })).code).toBe(
        'E_BACKEND_UNAVAILABLE',
      );
    } finally {
      await down.close();
      project2.cleanup();
    }
  });
});
