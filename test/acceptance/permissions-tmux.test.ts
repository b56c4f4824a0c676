/**
 * Permission modes with the real Claude Code TUI (tmux runner, private socket) against the mock
 * Anthropic API, through `the-loop run --runner tmux`, with an API key (a canary) in the CLI's env:
 * - the default configuration (bubblewrap sandbox + gateway → bypass): the multi-step
 *   `env > a; ls > b` runs without a prompt; `a` holds the capability token, never the key;
 * - the sandbox off (default mode): the TUI shows its permission prompt, Claude's Notification hook
 *   says so, and the session is shown `waiting for a person` until a person answers it with
 *   `the-loop sessions keys`; then the command runs, the turn ends, and the session no longer waits.
 * The canary appears in no output, no file of the data dir (hooks.jsonl included), no scrollback.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseWorkItem, workItemSlug } from '../../src/core/work-item.js';
import { Tmux } from '../../src/runners/tmux/tmux.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import { type CliResult, freePort, runCli } from '../helpers/cli.js';
import { removeWhenQuiet, stopTmuxServer } from '../helpers/tmux.js';
import { realBinary } from './helpers.js';

const COMMAND = 'env > a; ls > b';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Turn {
  status: string;
  endReason: string;
  warnings: string[];
  guard: { sandbox: string; permissions: string; gateway: { model: boolean; github: boolean } } | null;
}
interface Listed {
  workItem: string;
  waiting: { since: string; message: string } | null;
  running: boolean;
}

function allFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    return e.isDirectory() ? allFiles(path) : e.isFile() ? [path] : [];
  });
}

/** One project: a TUI on its own tmux socket, the mock, a canary key; `cli` keeps every output. */
async function project(name: string, topConfig: Record<string, unknown>) {
  const socket = `the-loop-perm-${name}-${randomUUID().slice(0, 8)}`;
  const tmux = new Tmux({ socket });
  const root = mkdtempSync(join(tmpdir(), `the-loop-perm-${name}-`));
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
      defaults: { engine: 'claude', backstopSeconds: 150 },
      tmux: { socket, readySeconds: 60 },
      // The TUI outlives each `run`: it must find the gateway where it was pointed.
      gateway: { port: await freePort() },
      ...topConfig,
      // CLAUDE_CODE_SANDBOXED pre-answers the folder-trust dialog.
      engines: {
        claude: { binary: realBinary('claude'), env: { ...home.env, CLAUDE_CODE_SANDBOXED: '1' } },
      },
    }),
  );
  const env = { ANTHROPIC_API_KEY: canary, THE_LOOP_CONFIG: join(root, 'config.yaml') };
  const outputs: string[] = [];
  const cli = async (args: string[], timeoutMs = 30_000) => {
    const res = await runCli(args, { cwd: root, env, timeoutMs });
    outputs.push(res.stdout, res.stderr);
    return res;
  };
  const listed = async () => {
    const res = await cli(['sessions', 'list', '--json']);
    expect(res.code, res.stderr).toBe(0);
    return JSON.parse(res.stdout) as Listed[];
  };
  const turns = async (wi: string) =>
    (JSON.parse((await cli(['sessions', 'show', wi, '--json'])).stdout) as { turns: Turn[] }).turns;
  /** The canary is nowhere: outputs, every file of the data dir (hooks.jsonl too), the scrollback. */
  const expectCanaryNowhere = async (target: string) => {
    for (const out of outputs) expect(out).not.toContain(canary);
    const files = allFiles(join(root, 'data'));
    expect(files.some((f) => f.endsWith('hooks.jsonl'))).toBe(true);
    for (const file of files) expect(readFileSync(file).includes(canary), file).toBe(false);
    const scrollback = await tmux.capturePane(target, { history: true });
    expect(scrollback.length).toBeGreaterThan(0);
    expect(scrollback).not.toContain(canary);
    // The gateway swapped the capability token for the real key on the way out.
    expect(mock.modelTurns()[0]?.headers['x-api-key']).toBe(canary);
  };
  /** A `run` still in flight (a failed test) is ended by ending its TUI, and awaited before cleanup. */
  let pending: Promise<CliResult> | undefined;
  const cleanup = async () => {
    let settled = false;
    void pending?.finally(() => {
      settled = true;
    });
    while (pending && !settled) {
      await stopTmuxServer(tmux);
      await sleep(500);
    }
    await stopTmuxServer(tmux);
    await mock.close();
    await removeWhenQuiet(root);
  };
  const start = (args: string[]) => {
    const failed = (error: unknown): CliResult => ({
      code: null,
      stdout: String(error),
      stderr: '',
      pid: undefined,
    });
    pending = cli(args, 240_000).catch(failed);
    return pending;
  };
  return { tmux, root, work, mock, canary, cli, start, listed, turns, outputs, expectCanaryNowhere, cleanup };
}

describe('the real Claude Code TUI in the default configuration (sandbox bwrap + gateway)', () => {
  const WI = 'github:acme/perm-tui#5';
  const TARGET = `loop-${workItemSlug(parseWorkItem(WI))}`;
  let p: Awaited<ReturnType<typeof project>>;
  beforeAll(async () => {
    p = await project('bypass', {});
  });
  afterAll(async () => p?.cleanup());

  it('runs the multi-step command without a permission prompt, holding only the capability token', async () => {
    const run = await p.cli(
      ['run', WI, '--cwd', p.work, '--runner', 'tmux', '--', 'Write the files.'],
      200_000,
    );
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(0);
    expect(run.stdout).not.toContain('⏸');
    expect(run.stdout).not.toContain('⚠');
    expect(run.stdout).toMatch(/guard: sandbox bwrap · .* · permissions bypass/);
    expect(readFileSync(join(p.work, 'b'), 'utf8').split('\n')).toContain('a');
    const a = readFileSync(join(p.work, 'a'), 'utf8');
    expect(a).toMatch(/^ANTHROPIC_API_KEY=tlg1_[A-Za-z0-9_-]+$/m);
    expect(a).not.toContain(p.canary);
    const turns = await p.turns(WI);
    expect(turns).toHaveLength(1);
    expect(turns[0]).toMatchObject({
      status: 'succeeded',
      endReason: 'result',
      warnings: [],
      guard: { sandbox: 'bwrap', permissions: 'bypass', gateway: { model: true, github: true } },
    });
    expect((await p.listed()).map((s) => s.waiting)).toEqual([null]);
    const screen = await p.tmux.capturePane(TARGET, { history: true });
    expect(screen).toContain('Done.');
    expect(screen).not.toMatch(/Do you want to proceed\?/);
    await p.expectCanaryNowhere(TARGET);
  }, 240_000);
});

describe('the real Claude Code TUI with the sandbox off (default permission mode)', () => {
  const WI = 'github:acme/perm-ask#6';
  const TARGET = `loop-${workItemSlug(parseWorkItem(WI))}`;
  let p: Awaited<ReturnType<typeof project>>;
  beforeAll(async () => {
    p = await project('ask', { sandbox: { mode: 'none' } });
  });
  afterAll(async () => p?.cleanup(), 200_000);

  it('shows the session waiting for a person at the permission prompt until a key answers it', async () => {
    // `run` blocks until the turn ends: the session is watched from outside while it runs.
    const running = p.start(['run', WI, '--cwd', p.work, '--runner', 'tmux', '--', 'Write the files.']);
    let settled = false;
    void running.finally(() => {
      settled = true;
    });
    let waiting: Listed | undefined;
    while (!settled && !waiting) {
      waiting = (await p.listed()).find((s) => s.waiting !== null);
      if (!waiting) await sleep(250);
    }
    expect(
      waiting,
      `the turn ended without waiting:\n${settled ? (await running).stdout : ''}`,
    ).toBeDefined();
    // Claude's Notification hook (notification_type permission_prompt) names what it waits for.
    expect(waiting).toMatchObject({ workItem: WI, running: true });
    expect(waiting?.waiting?.message).toBe('Claude needs your permission');
    // The prompt is up on the real screen, and the command has not run.
    const prompt = await p.tmux.capturePane(TARGET);
    expect(prompt).toMatch(/Bash command\s+env > a; ls > b/);
    expect(prompt).toMatch(/Do you want to proceed\?\s+❯ 1\. Yes/);
    expect(existsSync(join(p.work, 'a'))).toBe(false);
    const list = await p.cli(['sessions', 'list']);
    expect(list.stdout).toMatch(new RegExp(`${TARGET}\\s+waiting for a person\\s+1`));
    const show = await p.cli(['sessions', 'show', WI]);
    expect(show.stdout).toMatch(/status {6}waiting for a person since \S+: Claude needs your permission/);
    expect(show.stdout).toMatch(/guard {7}NO sandbox · .* · permissions default/);

    // A person answers: Enter takes the highlighted "1. Yes".
    const keys = await p.cli(['sessions', 'keys', WI, 'Enter']);
    expect(keys.code, keys.stderr).toBe(0);
    const run = await running;
    expect(run.stderr).toBe('');
    expect(run.code, run.stdout).toBe(0);
    // The turn went on after the prompt: the command's result, then the answer.
    expect(run.stdout).toMatch(
      /⏸ waiting for a person: Claude needs your permission\n(.*\n)*? {2}✓ \(Bash completed with no output\)\n(.*\n)*? {2}│ Done\./,
    );
    expect(readFileSync(join(p.work, 'b'), 'utf8').split('\n')).toContain('a');
    const a = readFileSync(join(p.work, 'a'), 'utf8');
    expect(a).toMatch(/^ANTHROPIC_API_KEY=tlg1_[A-Za-z0-9_-]+$/m);
    expect(a).not.toContain(p.canary);
    const turns = await p.turns(WI);
    expect(turns).toHaveLength(1);
    expect(turns[0]).toMatchObject({
      status: 'succeeded',
      endReason: 'result',
      // Nothing refused: a person approved it.
      warnings: [],
      guard: { sandbox: 'none', permissions: 'default', gateway: { model: true, github: true } },
    });
    // No longer waiting, by any view.
    expect((await p.listed()).map((s) => [s.waiting, s.running])).toEqual([[null, false]]);
    const after = await p.cli(['sessions', 'list']);
    expect(after.stdout).not.toContain('waiting for a person');
    expect(after.stdout).toMatch(new RegExp(`${TARGET}\\s+active`));
    expect((await p.cli(['sessions', 'show', WI])).stdout).toMatch(/status {6}active\n/);
    const screen = await p.tmux.capturePane(TARGET);
    expect(screen).toContain('Done.');
    expect(screen).not.toContain('Do you want to proceed?');
    await p.expectCanaryNowhere(TARGET);
  }, 300_000);
});
