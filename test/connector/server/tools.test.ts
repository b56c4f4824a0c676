import { execFileSync } from 'node:child_process';
import { createHash, createHmac } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject, runCli } from '../../helpers/cli.js';
import { call, type McpHandle, privateTmux, startMcp } from '../../helpers/mcp.js';

/**
 * `the-loop mcp` through the SDK's own client over stdio, against real tmux on a private socket:
 * each tool works, every write is accounted (audit and ledger), and what the grant does not cover is
 * refused with its code.
 */

const tmux = privateTmux();
let project: ReturnType<typeof makeProject>;
let mcp: McpHandle;

beforeAll(async () => {
  await tmux.session('work-a');
  await tmux.session('work-b');
  await tmux.session('other');
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: {
      operators: {
        ops: {
          scope: 'destroy',
          targets: { prefixes: ['work-'] },
          run: { timeoutSeconds: 20, inPane: true },
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
});

describe('the tools', () => {
  it('publishes five tools, each with an input and output schema and all four annotations', async () => {
    const { tools } = await mcp.client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'close_terminal',
      'list_terminals',
      'read_terminal',
      'run_command',
      'send_input',
    ]);
    for (const tool of tools) {
      expect(tool.inputSchema.type).toBe('object');
      expect(tool.outputSchema?.type).toBe('object');
      for (const hint of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const)
        expect(typeof tool.annotations?.[hint], `${tool.name}.${hint}`).toBe('boolean');
    }
  });

  it('lists only the granted terminals, with canonical ids', async () => {
    const listed = await call(mcp.client, 'list_terminals', {});
    expect(listed.isError).toBe(false);
    const terminals = listed.structured?.terminals as Array<{ id: string; name: string; backend: string }>;
    expect(terminals.map((t) => t.name).sort()).toEqual(['work-a', 'work-b']);
    for (const t of terminals) {
      expect(t.id).toMatch(/^%\d+$/);
      expect(t.backend).toBe('tmux');
    }
    expect(terminals.find((t) => t.name === 'work-a')?.id).toBe(await tmux.paneOf('work-a'));
  });

  it('sends text and keys, and reads them back', async () => {
    const sent = await call(mcp.client, 'send_input', {
      target: 'work-a',
      text: 'echo sent-$((6*7))',
      keys: ['Enter'],
    });
    expect(sent.isError, sent.text).toBe(false);
    expect(sent.structured).toMatchObject({ terminal: { name: 'work-a' }, keys: 1 });
    let lines: string[] = [];
    for (let i = 0; i < 50 && !lines.includes('sent-42'); i++) {
      const read = await call(mcp.client, 'read_terminal', { target: 'work-a', lines: 20 });
      lines = read.structured?.lines as string[];
      if (!lines.includes('sent-42')) await new Promise((r) => setTimeout(r, 100));
    }
    expect(lines).toContain('sent-42');
  });

  it('refuses an unknown key without typing anything', async () => {
    const before = await tmux.capture('work-b');
    const sent = await call(mcp.client, 'send_input', {
      target: 'work-b',
      text: 'typed',
      keys: ['Enter', 'NotAKey'],
    });
    expect(sent.code).toBe('E_UNKNOWN_KEY');
    await new Promise((r) => setTimeout(r, 200));
    expect(await tmux.capture('work-b')).toBe(before);
  });

  it('runs a command in a new pane and returns its real exit status and output', async () => {
    const three = await call(mcp.client, 'run_command', {
      target: 'work-a',
      command: 'printf "a\\nb\\n"; exit 3',
    });
    expect(three.isError, three.text).toBe(false);
    expect(three.structured).toMatchObject({ exitStatus: 3, signal: null, kept: false });
    expect(String(three.structured?.output)).toContain('a\nb');
    const ok = await call(mcp.client, 'run_command', { target: 'work-a', command: 'true' });
    expect(ok.structured?.exitStatus).toBe(0);
  });

  it('stops a command that does not end, and says so', async () => {
    const slow = await call(mcp.client, 'run_command', {
      target: 'work-a',
      command: 'echo started; sleep 600',
      timeoutSeconds: 1,
    });
    expect(slow.code).toBe('E_TIMEOUT');
    expect(slow.text).toContain('started');
    const panes = await tmux.tmux.must(['list-panes', '-s', '-t', '=work-a', '-F', '#{pane_id}'], 'list');
    expect(panes.trim().split('\n')).toHaveLength(1);
  });

  it('runs in the pane itself at a shell prompt, and refuses a busy pane', async () => {
    const here = await call(mcp.client, 'run_command', { target: 'work-b', command: 'false', where: 'pane' });
    expect(here.isError, here.text).toBe(false);
    expect(here.structured?.exitStatus).toBe(1);
    await tmux.tmux.must(['send-keys', '-t', '=work-b:', 'sleep 30', 'Enter'], 'send');
    await new Promise((r) => setTimeout(r, 300));
    const busy = await call(mcp.client, 'run_command', { target: 'work-b', command: 'true', where: 'pane' });
    expect(busy.code).toBe('E_PANE_BUSY');
    await tmux.tmux.must(['send-keys', '-t', '=work-b:', 'C-c'], 'send');
  });

  it('refuses a target outside the grant, and one that does not exist', async () => {
    const other = await call(mcp.client, 'read_terminal', { target: 'other' });
    expect(other.code).toBe('E_TARGET_NOT_BOUND');
    const byId = await call(mcp.client, 'send_input', { target: await tmux.paneOf('other'), text: 'x' });
    expect(byId.code).toBe('E_TARGET_NOT_BOUND');
    const missing = await call(mcp.client, 'read_terminal', { target: 'work-zzz' });
    expect(missing.code).toBe('E_TARGET_NOT_FOUND');
  });

  it('refuses a run beyond the grant instead of clipping it', async () => {
    const long = await call(mcp.client, 'run_command', {
      target: 'work-a',
      command: 'true',
      timeoutSeconds: 21,
    });
    expect(long.code).toBe('E_SCOPE');
  });

  it('closes a terminal', async () => {
    await tmux.session('work-gone');
    const closed = await call(mcp.client, 'close_terminal', { target: 'work-gone' });
    expect(closed.isError, closed.text).toBe(false);
    expect((await tmux.tmux.run(['has-session', '-t', '=work-gone'])).ok).toBe(false);
  });

  it('records every write in the audit and as an unmetered drive in the ledger', async () => {
    const audit = await runCli(['mcp', 'audit', '--json'], { cwd: project.dir });
    expect(audit.code, audit.stderr).toBe(0);
    const rows = JSON.parse(audit.stdout) as Array<{ tool: string; outcome: string; payloadSha256: string }>;
    expect(rows.some((r) => r.tool === 'send_input' && r.outcome === 'ok')).toBe(true);
    expect(rows.some((r) => r.tool === 'run_command' && r.outcome === 'ok')).toBe(true);
    expect(rows.some((r) => r.outcome === 'refused')).toBe(true);
    for (const r of rows) expect(r.payloadSha256).toMatch(/^[0-9a-f]{64}$/);
    // Keyed with the install's key (0600): an empty payload's digest is not SHA-256 of "{}".
    const keyFile = execFileSync('find', [project.dir, '-name', 'audit.key'], { encoding: 'utf8' }).trim();
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    const listed = rows.find((r) => r.tool === 'list_terminals');
    expect(listed?.payloadSha256).not.toBe(createHash('sha256').update('{}').digest('hex'));
    expect(listed?.payloadSha256).toBe(
      createHmac('sha256', readFileSync(keyFile)).update('{}').digest('hex'),
    );
    const usage = await runCli(['usage', '--json'], { cwd: project.dir });
    expect(usage.code, usage.stderr).toBe(0);
    const report = JSON.parse(usage.stdout) as {
      notIncluded: { unmetered: Array<{ runner: string; reason: string; count: number }> };
    };
    const drives = report.notIncluded.unmetered.filter((u) => u.runner === 'mcp:tmux');
    expect(drives.reduce((n, d) => n + d.count, 0)).toBeGreaterThanOrEqual(5);
    const text = await runCli(['usage'], { cwd: project.dir });
    expect(text.stdout).toMatch(/Not included/);
  });
});
