/**
 * Permission modes with the real Claude Code CLI (process runner) against the mock Anthropic API,
 * through `the-loop run`, with an API key (a canary) in the CLI's environment:
 * - the default configuration (bubblewrap sandbox + gateway → `auto` = bypass): the multi-step
 *   `env > a; ls > b` runs without a permission refusal; `a` holds the capability token, never the key;
 * - the sandbox off (`auto` = default): headless Claude refuses the same command for want of an
 *   approval; the turn succeeds and says so in a warning (`run`, `sessions show` text and JSON).
 * The canary appears in no output and no file of the data dir.
 */
import { randomUUID } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { freePort, runCli } from '../helpers/cli.js';
import { realBinary } from './helpers.js';

const WI = 'github:acme/perm#4';
const COMMAND = 'env > a; ls > b';

interface Turn {
  status: string;
  endReason: string;
  warnings: string[];
  guard: { sandbox: string; permissions: string; gateway: { model: boolean; github: boolean } } | null;
}

interface Run {
  root: string;
  work: string;
  mock: MockApi;
  canary: string;
  run: { code: number | null; stdout: string; stderr: string };
  showText: string;
  turns: Turn[];
  outputs: string[];
}

function allFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    return e.isDirectory() ? allFiles(path) : e.isFile() ? [path] : [];
  });
}

/** One turn of the real Claude Code that runs COMMAND with its Bash tool, then answers. */
async function runOnce(topConfig: Record<string, unknown>): Promise<Run> {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-perm-'));
  const work = join(root, 'work');
  mkdirSync(work);
  const mock = await startAnthropicMock({
    script: [
      { kind: 'shell', command: COMMAND },
      { kind: 'text', text: 'Done.' },
    ],
  });
  const home = prepareClaudeHome(join(root, 'engine'), mock.url);
  const canary = `sk-ant-canary-${randomUUID()}`;
  writeFileSync(
    join(root, 'config.yaml'),
    stringify({
      dataDir: 'data',
      defaults: { engine: 'claude', backstopSeconds: 150, killGraceSeconds: 2 },
      gateway: { port: await freePort() },
      ...topConfig,
      engines: { claude: { binary: realBinary('claude'), env: home.env } },
    }),
  );
  const env = { ANTHROPIC_API_KEY: canary, THE_LOOP_CONFIG: join(root, 'config.yaml') };
  const run = await runCli(['run', WI, '--cwd', work, '--', 'Write the files.'], {
    cwd: root,
    env,
    timeoutMs: 200_000,
  });
  const text = await runCli(['sessions', 'show', WI], { cwd: root, env });
  const json = await runCli(['sessions', 'show', WI, '--json'], { cwd: root, env });
  expect(text.code, text.stderr).toBe(0);
  expect(json.code, json.stderr).toBe(0);
  return {
    root,
    work,
    mock,
    canary,
    run,
    showText: text.stdout,
    turns: (JSON.parse(json.stdout) as { turns: Turn[] }).turns,
    outputs: [run.stdout, run.stderr, text.stdout, text.stderr, json.stdout, json.stderr],
  };
}

/** The canary is in no CLI output and no file of the data dir (DB, log, hooks, session files). */
function expectCanaryNowhere(r: Run): void {
  for (const out of r.outputs) expect(out).not.toContain(r.canary);
  const files = allFiles(join(r.root, 'data'));
  expect(files.some((f) => f.endsWith('the-loop.db'))).toBe(true);
  for (const file of files) expect(readFileSync(file).includes(r.canary), file).toBe(false);
}

/** The tool results the engine sent back to the model (in its last request), as text. */
function toolResults(mock: MockApi): string {
  const body = mock.modelTurns().at(-1)?.body as { messages?: Array<{ content: unknown }> } | undefined;
  const blocks = (body?.messages ?? []).flatMap((m) => (Array.isArray(m.content) ? m.content : []));
  return JSON.stringify(blocks.filter((b: { type?: string }) => b.type === 'tool_result'));
}

describe('permission modes with the real Claude Code CLI (process runner)', () => {
  let bypass: Run;
  let refused: Run;
  beforeAll(async () => {
    // Default configuration: bwrap is installed here, the gateway is on, permissions.mode is auto.
    bypass = await runOnce({});
    // The sandbox off: auto means the default mode, no bypass flag; IS_SANDBOX=1 (the test home) stays.
    refused = await runOnce({ sandbox: { mode: 'none' } });
  }, 420_000);
  afterAll(async () => {
    for (const r of [bypass, refused]) {
      await r?.mock.close();
      if (r) rmSync(r.root, { recursive: true, force: true });
    }
  });

  it('default configuration: the multi-step command runs without a refusal, holding only the capability token', () => {
    expect(bypass.run.stderr).toBe('');
    expect(bypass.run.code, bypass.run.stdout).toBe(0);
    expect(existsSync(join(bypass.work, 'b'))).toBe(true);
    expect(readFileSync(join(bypass.work, 'b'), 'utf8').split('\n')).toContain('a');
    const a = readFileSync(join(bypass.work, 'a'), 'utf8');
    expect(a).toMatch(/^ANTHROPIC_API_KEY=tlg1_[A-Za-z0-9_-]+$/m);
    expect(a).not.toContain(bypass.canary);
    expect(bypass.turns).toHaveLength(1);
    expect(bypass.turns[0]).toMatchObject({
      status: 'succeeded',
      endReason: 'result',
      warnings: [],
      guard: { sandbox: 'bwrap', permissions: 'bypass', gateway: { model: true, github: true } },
    });
    expect(bypass.run.stdout).toMatch(/guard: sandbox bwrap · .* · permissions bypass/);
    expect(bypass.run.stdout).not.toContain('⚠');
    expect(bypass.showText).not.toContain('⚠');
    // The model got the command's (empty) output, not a refusal.
    expect(toolResults(bypass.mock)).toContain('"is_error":false');
    expect(toolResults(bypass.mock)).not.toMatch(/approval|permission/i);
    // The gateway swapped the capability token for the real key on the way out.
    expect(bypass.mock.modelTurns()[0]?.headers['x-api-key']).toBe(bypass.canary);
  });

  it('sandbox off, default mode: headless Claude refuses the command; the turn succeeds with a warning', () => {
    expect(refused.run.stderr).toBe('');
    expect(refused.run.code, refused.run.stdout).toBe(0);
    expect(existsSync(join(refused.work, 'a'))).toBe(false);
    expect(existsSync(join(refused.work, 'b'))).toBe(false);
    // Claude's own refusal, as the model saw it.
    expect(toolResults(refused.mock)).toContain('"is_error":true');
    expect(toolResults(refused.mock)).toMatch(/The following parts require approval: env, ls/);
    const warning = /the engine refused 1 tool call \(Bash\) for want of a permission nobody could give/;
    expect(refused.turns).toHaveLength(1);
    expect(refused.turns[0]).toMatchObject({
      status: 'succeeded',
      endReason: 'result',
      guard: { sandbox: 'none', permissions: 'default' },
    });
    expect(refused.turns[0]?.warnings).toHaveLength(1);
    expect(refused.turns[0]?.warnings[0]).toMatch(warning);
    // `run` shows the refused call as it happens and the warning in its report.
    expect(refused.run.stdout).toMatch(
      /⚠ the engine refused Bash .*env > a; ls > b.* \(its permission mode\)/,
    );
    expect(refused.run.stdout).toMatch(new RegExp(`^ {2}⚠ ${warning.source}`, 'm'));
    expect(refused.run.stdout).toMatch(/guard: NO sandbox · .* · permissions default/);
    expect(refused.showText).toMatch(new RegExp(`^ {5}⚠ ${warning.source}`, 'm'));
  });

  it('keeps the real API key out of every output and every file of the data dir', () => {
    for (const r of [bypass, refused]) {
      expectCanaryNowhere(r);
      expect(r.mock.modelTurns()[0]?.headers['x-api-key']).toBe(r.canary);
    }
  });
});
