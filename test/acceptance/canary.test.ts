/**
 * A canary key echoed by the model, with the real Claude Code CLI in the default configuration (the
 * bubblewrap sandbox, the gateway holding the key), on the process runner and on the tmux runner:
 * the mock model has the engine run a command that prints the key — base64-encoded in `env` style,
 * reversed, truncated — and then quotes it itself, whole, truncated to 17 characters, reversed and
 * base64-encoded (standard and url-safe). Afterwards no form of the key (whole, any run of 12 of its
 * characters, reversed, base64 at any alignment) is in any file under the data directory — the
 * registry and its WAL, the log, the session's state dir, the engine's own transcripts in its
 * sandbox home — or in the output of any command that shows what the turn did.
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { Tmux } from '../../src/runners/tmux/tmux.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi, MockStep } from '../fixtures/mock-apis/types.js';
import { canaryFormsIn, canaryLeaksUnder, filesUnder } from '../helpers/canary.js';
import { type CliResult, freePort, runCli } from '../helpers/cli.js';
import { removeWhenQuiet, stopTmuxServer } from '../helpers/tmux.js';
import { realBinary } from './helpers.js';

const b64 = (text: string) => Buffer.from(text).toString('base64');
const b64url = (text: string) => Buffer.from(text).toString('base64url');
const rev = (text: string) => Array.from(text).reverse().join('');

/** What the model does with the key: has it printed by a command (a tool result), then quotes it. */
function echoingScript(canary: string): MockStep[] {
  return [
    {
      kind: 'shell',
      // `env`-style output, base64-encoded by the shell; the key reversed; a truncated key.
      command: `printf 'ANTHROPIC_API_KEY=%s\\n' '${canary}' | base64; printf '%s\\n' '${rev(canary)}' '${canary.slice(0, 20)}'`,
    },
    {
      kind: 'text',
      text: [
        `The key is ${canary}.`,
        `Truncated: ${canary.slice(5, 22)}…`,
        `Reversed: ${rev(canary)}`,
        `Base64: ${b64(canary)} and url-safe ${b64url(`K=${canary}`)}`,
      ].join('\n'),
    },
  ];
}

interface Setup {
  root: string;
  mock: MockApi;
  canary: string;
  env: Record<string, string>;
  outputs: Array<{ what: string; text: string }>;
  cli: (args: string[]) => Promise<CliResult>;
}

async function setUp(runner: 'process' | 'tmux', socket: string): Promise<Setup> {
  const root = mkdtempSync(join(tmpdir(), `the-loop-canary-${runner}-`));
  mkdirSync(join(root, 'work'));
  const canary = `sk-ant-canary-${randomUUID()}`;
  const mock = await startAnthropicMock({ script: echoingScript(canary) });
  const home = prepareClaudeHome(join(root, 'engine'), mock.url);
  writeFileSync(
    join(root, 'config.yaml'),
    stringify({
      dataDir: 'data',
      defaults: { engine: 'claude', runner, backstopSeconds: 120 },
      tmux: { socket, readySeconds: 60 },
      gateway: { port: await freePort() },
      engines: {
        // The folder-trust dialog of the TUI is pre-answered by CLAUDE_CODE_SANDBOXED.
        claude: { binary: realBinary('claude'), env: { ...home.env, CLAUDE_CODE_SANDBOXED: '1' } },
      },
    }),
  );
  // The key is the daemon's: the gateway holds it and puts it on the model requests.
  const env = { THE_LOOP_CONFIG: join(root, 'config.yaml'), ANTHROPIC_API_KEY: canary };
  const outputs: Setup['outputs'] = [];
  const cli = async (args: string[]) => {
    const res = await runCli(args, { cwd: root, env, timeoutMs: 150_000 });
    outputs.push({ what: `${args.join(' ')} (stdout)`, text: res.stdout });
    outputs.push({ what: `${args.join(' ')} (stderr)`, text: res.stderr });
    return res;
  };
  return { root, mock, canary, env, outputs, cli };
}

/** Every command that shows what a turn did, in text and JSON. */
async function showEverything(s: Setup, workItem: string): Promise<void> {
  for (const json of [[], ['--json']]) {
    await s.cli(['sessions', 'list', '--all', ...json]);
    await s.cli(['sessions', 'show', workItem, ...json]);
    await s.cli(['sessions', 'logs', workItem, ...json]);
    await s.cli(['usage', ...json]);
    await s.cli(['usage', '--by', 'session', ...json]);
    await s.cli(['acts', ...json]);
  }
  const events = await s.cli(['events', 'list', '--json']);
  const deliveries = JSON.parse(events.stdout) as Array<{ id: string }>;
  expect(deliveries.length).toBeGreaterThan(0);
  await s.cli(['events', 'list']);
  for (const d of deliveries) {
    await s.cli(['events', 'show', d.id, '--body']);
    await s.cli(['events', 'show', d.id, '--json']);
  }
}

function expectNoCanary(s: Setup): void {
  const leaks = canaryLeaksUnder(join(s.root, 'data'), s.canary);
  expect(leaks, 'files under the data directory holding a form of the key').toEqual([]);
  for (const { what, text } of s.outputs) expect(canaryFormsIn(text, s.canary), what).toEqual([]);
}

/** The model really echoed the key, and the engine really ran the command: the test is not vacuous. */
function expectEchoed(s: Setup): void {
  const bodies = s.mock.modelTurns().map((r) => JSON.stringify(r.body));
  // The command's output came back to the model as a tool result (base64 of the `env` line included).
  expect(bodies.some((b) => b.includes(b64(`ANTHROPIC_API_KEY=${s.canary}\n`).slice(8, 40)))).toBe(true);
  expect(bodies.some((b) => b.includes(rev(s.canary)))).toBe(true);
  // The engine's own transcript exists under the data dir (the sandbox's session home), masked.
  const transcripts = filesUnder(join(s.root, 'data')).filter((f) =>
    /\/homes\/.*\/projects\/.*\.jsonl$/.test(f),
  );
  expect(transcripts.length).toBeGreaterThan(0);
}

describe('a canary key echoed by the model, process runner (real Claude Code, sandbox and gateway)', () => {
  let s: Setup;
  const WI = 'github:acme/canary#1';
  beforeAll(async () => {
    s = await setUp('process', `the-loop-canary-p-${randomUUID().slice(0, 8)}`);
  }, 60_000);
  afterAll(async () => {
    await s?.mock.close();
    if (s) await removeWhenQuiet(s.root);
  });

  it('is in no file under the data directory and in no command output', async () => {
    const run = await s.cli(['run', WI, '--cwd', join(s.root, 'work'), '--', 'Show me the key.']);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.stdout).toContain('[secret]');
    await showEverything(s, WI);
    const logs = s.outputs.find((o) => o.what.startsWith('sessions logs github:acme/canary#1 --json'));
    expect(logs?.text).toMatch(/The key is \[secret\]/);
    expectEchoed(s);
    expectNoCanary(s);
  }, 300_000);
});

describe('a canary key echoed by the model, tmux runner (the real Claude Code TUI, sandbox and gateway)', () => {
  const socket = `the-loop-canary-t-${randomUUID().slice(0, 8)}`;
  const tmux = new Tmux({ socket });
  let s: Setup;
  const WI = 'github:acme/canary#2';
  beforeAll(async () => {
    s = await setUp('tmux', socket);
  }, 60_000);
  afterAll(async () => {
    await stopTmuxServer(tmux);
    await s?.mock.close();
    if (s) await removeWhenQuiet(s.root);
  });

  it('is in no file under the data directory and in no command output', async () => {
    const run = await s.cli(['run', WI, '--cwd', join(s.root, 'work'), '--', 'Show me the key.']);
    expect(run.code, run.stdout + run.stderr).toBe(0);
    await showEverything(s, WI);
    const show = JSON.parse(
      s.outputs.find((o) => o.what.startsWith(`sessions show ${WI} --json (stdout)`))?.text ?? '{}',
    ) as { session?: { runner: string }; turns?: Array<{ status: string; endReason: string }> };
    expect(show.session?.runner).toBe('tmux');
    expect(show.turns?.map((t) => [t.status, t.endReason])).toEqual([['succeeded', 'result']]);
    expectEchoed(s);
    // The hook events file holds no text of the turn at all (ids, paths and kinds only).
    const hooks = filesUnder(join(s.root, 'data')).filter((f) => f.endsWith('hooks.jsonl'));
    expect(hooks).toHaveLength(1);
    expectNoCanary(s);
    // And once the TUI is gone (it writes its last records as it exits), still nothing.
    const close = await s.cli(['sessions', 'close', WI]);
    expect(close.code, close.stderr).toBe(0);
    await stopTmuxServer(tmux);
    expectNoCanary(s);
  }, 300_000);
});
