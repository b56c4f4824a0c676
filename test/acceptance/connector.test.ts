/**
 * The real Claude Code CLI drives a bound tmux terminal through `the-loop mcp`: the connector is
 * given to it with `--mcp-config` (as a user would register it), the mock model API has it call the
 * connector's tools, and what is checked is what came back to the model — the `tool_result` blocks of
 * the next request — never the screen. Then: the drives are unmetered under "Not included" in
 * `the-loop usage`, the audit shows every call, and a canary secret (in the bound session's
 * environment, and a credential of the connector's own environment) is in no tool result, no report,
 * no file.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import {
  startAnthropicToolMock,
  type ToolExchange,
  type ToolMock,
} from '../fixtures/mock-apis/anthropic-tools.js';
import { canaryFormsIn, canaryLeaksUnder } from '../helpers/canary.js';
import { BIN, makeProject, runCli } from '../helpers/cli.js';
import { privateTmux } from '../helpers/mcp.js';
import { realBinary } from './helpers.js';

const tmux = privateTmux();
const BOUND = `bound-${randomUUID().slice(0, 6)}`;
const canary = `sk-canary-${randomUUID()}`;
const T = (tool: string) => `mcp__the-loop__${tool}`;

/** What the model asks for, in order; the last step ends the turn. */
const SCRIPT = [
  { tool: T('list_terminals'), input: {} },
  { tool: T('run_command'), input: { target: BOUND, command: 'echo hi; exit 3' } },
  { tool: T('run_command'), input: { target: 'other', command: 'echo never' } },
  // The pane inherits the session's environment: its length proves the secret was there to print.
  {
    tool: T('run_command'),
    input: {
      target: BOUND,
      command: 'printf "len=%s value=%s\\n" "$(printf %s "$LOOP_CANARY" | wc -c)" "$LOOP_CANARY"',
    },
  },
  { tool: T('send_input'), input: { target: BOUND, text: 'echo typed-by-claude', keys: ['Enter'] } },
  { tool: T('read_terminal'), input: { target: BOUND, lines: 20 } },
  { text: 'Done.' },
];

let project: ReturnType<typeof makeProject>;
let root: string;
let mock: ToolMock;
let claude: { code: number | null; stdout: string; stderr: string };
const outputs: Array<{ what: string; text: string }> = [];

/** Processes left running in the project directory (the connector, were Claude to leave it behind). */
function leftIn(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readlinkSync(`/proc/${entry}/cwd`) === dir) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

function runClaude(args: string[], env: Record<string, string>, cwd: string): Promise<typeof claude> {
  return new Promise((resolve, reject) => {
    const child = spawn(realBinary('claude'), args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 40_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

const exchange = (i: number): ToolExchange => {
  const e = mock.exchanges[i];
  if (!e) throw new Error(`the model made no call #${i + 1}; stdout:\n${claude.stdout}`);
  return e;
};
const resultOf = (i: number) => {
  const r = exchange(i).result;
  if (!r) throw new Error(`no tool_result came back for call #${i + 1}`);
  return r;
};

beforeAll(async () => {
  await tmux.session(BOUND, ['bash', '--norc', '--noprofile'], { LOOP_CANARY: canary });
  await tmux.session('other');
  project = makeProject({
    tmux: { socket: tmux.socket },
    connector: { operators: { ops: { scope: 'write', targets: { single: BOUND } } } },
  });
  root = mkdtempSync(join(tmpdir(), 'the-loop-connector-claude-'));
  mock = await startAnthropicToolMock(SCRIPT);
  const home = prepareClaudeHome(join(root, 'engine'), mock.url);
  const mcpConfig = join(root, 'mcp.json');
  writeFileSync(
    mcpConfig,
    JSON.stringify({
      mcpServers: {
        'the-loop': {
          command: process.execPath,
          args: [BIN, 'mcp', '--operator', 'ops'],
          cwd: project.dir,
          // A credential the-loop knows (the codex preset's key): the connector must mask it.
          env: { OPENAI_API_KEY: canary },
        },
      },
    }),
  );
  claude = await runClaude(
    [
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--mcp-config',
      mcpConfig,
      '--strict-mcp-config',
      // Headless, a tool not allowed is refused with "you haven't granted it yet": allow the server's.
      '--allowedTools',
      'mcp__the-loop',
      '--',
      'Drive the bound terminal.',
    ],
    { PATH: process.env.PATH ?? '', LANG: 'C.UTF-8', ...home.env, ANTHROPIC_API_KEY: 'sk-mock-not-secret' },
    project.dir,
  );
  outputs.push(
    { what: 'claude stdout', text: claude.stdout },
    { what: 'claude stderr', text: claude.stderr },
  );
}, 60_000);

afterAll(async () => {
  for (const pid of project ? leftIn(project.dir) : []) process.kill(pid, 'SIGKILL');
  await mock?.close();
  await tmux.stop();
  project?.cleanup();
  if (root) rmSync(root, { recursive: true, force: true });
});

describe('real Claude Code CLI driving tmux through `the-loop mcp` (--mcp-config)', () => {
  it('connects the server, offers its tools, and ends the turn', () => {
    expect(claude.code, claude.stdout + claude.stderr).toBe(0);
    const init = claude.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { type: string; subtype?: string; mcp_servers?: unknown })
      .find((e) => e.type === 'system' && e.subtype === 'init');
    expect(init?.mcp_servers).toEqual([{ name: 'the-loop', status: 'connected' }]);
    expect(mock.toolsOffered()).toEqual(
      expect.arrayContaining(SCRIPT.flatMap((s) => ('tool' in s ? [s.tool] : []))),
    );
    expect(mock.exchanges).toHaveLength(SCRIPT.length - 1);
    expect(mock.exchanges.every((e) => e.result !== null)).toBe(true);
  });

  it('lists only the bound terminal, without its environment', () => {
    const listed = resultOf(0);
    expect(listed.isError, listed.text).toBe(false);
    const { terminals } = JSON.parse(listed.text) as { terminals: Array<Record<string, unknown>> };
    expect(terminals.map((t) => t.name)).toEqual([BOUND]);
    expect(JSON.stringify(terminals)).not.toMatch(/LOOP_CANARY|environment|env/i);
  });

  it('run_command returns the real exit status and the output', () => {
    const run = resultOf(1);
    expect(run.isError, run.text).toBe(false);
    expect(JSON.parse(run.text)).toMatchObject({
      terminal: { name: BOUND },
      exitStatus: 3,
      signal: null,
      output: 'hi',
      kept: false,
    });
  });

  it('a call on an unbound target comes back as E_TARGET_NOT_BOUND, and nothing ran there', async () => {
    const refused = resultOf(2);
    expect(refused.isError).toBe(true);
    expect(refused.text).toMatch(/^E_TARGET_NOT_BOUND/);
    expect(await tmux.capture('other')).not.toContain('never');
  });

  it('sends input and reads it back', () => {
    const sent = resultOf(4);
    expect(sent.isError, sent.text).toBe(false);
    expect(JSON.parse(sent.text)).toMatchObject({ keys: 1 });
    const read = resultOf(5);
    expect(read.isError, read.text).toBe(false);
    expect((JSON.parse(read.text) as { lines: string[] }).lines.join('\n')).toContain('echo typed-by-claude');
  });

  it('records the drives as unmetered under "Not included", and every call in the audit', async () => {
    const usage = await runCli(['usage', '--json'], { cwd: project.dir });
    expect(usage.code, usage.stderr).toBe(0);
    const report = JSON.parse(usage.stdout) as {
      notIncluded: { unmetered: Array<{ runner: string; reason: string; count: number }> };
    };
    const drives = report.notIncluded.unmetered.filter((u) => u.runner === 'mcp:tmux');
    // Two runs and one send reached the terminal; the list, the read and the refusal drove nothing.
    expect(drives.reduce((n, d) => n + d.count, 0)).toBe(3);
    for (const d of drives) expect(d.reason).toMatch(/terminal connector drive \(operator ops/);
    const text = await runCli(['usage'], { cwd: project.dir });
    expect(text.stdout).toMatch(/not included: 3 unmetered runs/);
    expect(text.stdout).toMatch(
      /Not included \(cost unknown[^\n]*\n {2}\d+ unmetered runs? · \? on mcp:tmux/,
    );
    const audit = await runCli(['mcp', 'audit', '--json'], { cwd: project.dir });
    expect(audit.code, audit.stderr).toBe(0);
    const rows = (JSON.parse(audit.stdout) as Array<Record<string, unknown>>).reverse();
    expect(rows.map((r) => [r.tool, r.outcome, r.code])).toEqual([
      ['list_terminals', 'ok', null],
      ['run_command', 'ok', null],
      ['run_command', 'refused', 'E_TARGET_NOT_BOUND'],
      ['run_command', 'ok', null],
      ['send_input', 'ok', null],
      ['read_terminal', 'ok', null],
    ]);
    expect(rows[1]).toMatchObject({
      operator: 'ops',
      backend: 'tmux',
      targetName: BOUND,
      detail: expect.stringMatching(/^exit 3/),
    });
    outputs.push(
      { what: 'usage --json', text: usage.stdout },
      { what: 'usage', text: text.stdout },
      { what: 'mcp audit --json', text: audit.stdout },
      { what: 'mcp audit', text: (await runCli(['mcp', 'audit'], { cwd: project.dir })).stdout },
      { what: 'mcp grants', text: (await runCli(['mcp', 'grants'], { cwd: project.dir })).stdout },
    );
  });

  it('the canary secret is in no tool result, no report and no file', () => {
    // Not vacuous: the pane had the secret, printed it, and the connector masked it.
    const printed = resultOf(3);
    expect(printed.isError, printed.text).toBe(false);
    const { output } = JSON.parse(printed.text) as { output: string };
    expect(output).toMatch(new RegExp(`^len=${canary.length} value=\\S+`));
    for (const e of mock.exchanges) expect(canaryFormsIn(e.result?.text ?? '', canary), e.tool).toEqual([]);
    expect(canaryFormsIn(JSON.stringify(mock.requests), canary), 'requests to the model').toEqual([]);
    for (const { what, text } of outputs) expect(canaryFormsIn(text, canary), what).toEqual([]);
    // The registry (audit, ledger), its WAL and the log; Claude's own transcript of the results.
    expect(canaryLeaksUnder(project.dir, canary)).toEqual([]);
    expect(canaryLeaksUnder(join(root, 'engine'), canary)).toEqual([]);
  });

  it('leaves no connector process behind', () => {
    expect(leftIn(project.dir)).toEqual([]);
  });
});
