import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseWorkItem, workItemSlug } from '../../src/core/work-item.js';
import { Tmux } from '../../src/runners/tmux/tmux.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { freePort, runCli } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';
import { removeWhenQuiet, sessionProcesses, stopTmuxServer, waitGone } from '../helpers/tmux.js';
import { ARGV_RECORDER, realBinary } from './helpers.js';

const socket = `the-loop-tui-${randomUUID().slice(0, 8)}`;
const tmux = new Tmux({ socket });
const WI = 'github:acme/tui#7';
const TARGET = `loop-${workItemSlug(parseWorkItem(WI))}`;

/** Every file under a directory, as bytes. */
function allFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...allFiles(path));
    else out.push(path);
  }
  return out;
}

describe('tmux runner: the real Claude Code TUI in the sandbox, two turns, ended by hooks, metered at the wire', () => {
  let root: string;
  let mock: Awaited<ReturnType<typeof startAnthropicMock>>;
  let canary: string;
  const outputs: string[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-tui-'));
    mkdirSync(join(root, 'work'));
    mkdirSync(join(root, 'record'));
    mock = await startAnthropicMock({
      // Side requests (a title) cost something too: only the wire sees them.
      sideUsage: { input: 7, output: 3 },
      script: [
        {
          kind: 'text',
          text: 'Noted: PAPAYA-88.',
          usage: { input: 410, output: 11, cacheRead: 0, cacheCreation: 5 },
        },
        {
          kind: 'text',
          text: 'It was PAPAYA-88.',
          usage: { input: 520, output: 13, cacheRead: 300, cacheCreation: 0 },
        },
      ],
    });
    const home = prepareClaudeHome(join(root, 'engine'), mock.url);
    canary = `canary-tui-${randomUUID()}`;
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        dataDir: 'data',
        defaults: { engine: 'claude', backstopSeconds: 90 },
        tmux: { socket, readySeconds: 60 },
        // The TUI outlives each `run`: the next one must listen where the TUI was pointed.
        gateway: { port: await freePort() },
        sandbox: { writable: [join(root, 'record')] },
        engines: {
          claude: {
            binary: ARGV_RECORDER,
            // The folder-trust dialog is pre-answered by CLAUDE_CODE_SANDBOXED (see docs/engines.md).
            env: {
              ...home.env,
              CLAUDE_CODE_SANDBOXED: '1',
              REAL_BINARY: realBinary('claude'),
              ARGV_RECORD_FILE: join(root, 'record', 'argv.jsonl'),
            },
          },
        },
      }),
    );
    // An API key, as the README's Quick start sets one: the TUI holds the capability token instead,
    // approved in its first-run answers (no "custom API key" dialog).
    env = { THE_LOOP_CONFIG: join(root, 'config.yaml'), ANTHROPIC_API_KEY: canary };
  }, 60_000);

  afterAll(async () => {
    await stopTmuxServer(tmux);
    await mock?.close();
    await removeWhenQuiet(root);
  });

  it('runs two turns in one attachable TUI and records them', async () => {
    const first = await runCli(
      ['run', WI, '--cwd', join(root, 'work'), '--runner', 'tmux', '--', 'Remember the word PAPAYA-88.'],
      {
        cwd: root,
        env,
        timeoutMs: 150_000,
      },
    );
    outputs.push(first.stdout, first.stderr);
    expect(first.stderr).toBe('');
    expect(first.code, first.stdout).toBe(0);
    expect(await tmux.hasSession(TARGET)).toBe(true);
    const second = await runCli(['run', WI, '--', 'What was the word?'], {
      cwd: root,
      env,
      timeoutMs: 150_000,
    });
    outputs.push(second.stdout, second.stderr);
    expect(second.code, second.stdout).toBe(0);

    const turns = mock.modelTurns();
    expect(turns.length).toBeGreaterThanOrEqual(2);
    expect(JSON.stringify(turns.at(-1)?.body)).toContain('Noted: PAPAYA-88.');

    const show = await runCli(['sessions', 'show', WI, '--json'], { cwd: root, env });
    outputs.push(show.stdout);
    const shown = JSON.parse(show.stdout) as {
      session: { runner: string; tmuxTarget: string };
      turns: Array<{
        status: string;
        endReason: string;
        usage: { inputTokens: number; outputTokens: number } | null;
      }>;
    };
    expect(shown.session).toMatchObject({ runner: 'tmux', tmuxTarget: TARGET });
    expect(shown.turns.map((t) => [t.status, t.endReason])).toEqual([
      ['succeeded', 'result'],
      ['succeeded', 'result'],
    ]);
    // Each turn shows what the gateway saw of it: its model requests, side requests (a title) included.
    const side0 = mock.sideReported.reduce((n, u) => n + u.input, 0);
    const inputs = shown.turns.map((t) => t.usage?.inputTokens ?? 0);
    expect(inputs[0]).toBeGreaterThanOrEqual(410);
    expect(inputs[1]).toBeGreaterThanOrEqual(520);
    // A side request made between turns is the session's (in the ledger), not a turn's.
    expect((inputs[0] ?? 0) + (inputs[1] ?? 0)).toBeGreaterThanOrEqual(930);
    expect((inputs[0] ?? 0) + (inputs[1] ?? 0)).toBeLessThanOrEqual(930 + side0);

    const screen = await tmux.capturePane(TARGET, { history: true });
    expect(screen).toContain('It was PAPAYA-88.');

    // The usage ledger: one row per model response, read at the gateway, equal to what the mock
    // answered — its side requests included, which no transcript records; nothing counted twice
    // (the transcript's figures stay on the turns, not in the ledger).
    const side = mock.sideReported.reduce(
      (n, u) => ({ input: n.input + u.input, output: n.output + u.output }),
      { input: 0, output: 0 },
    );
    const usage = await runCli(['usage', '--json'], { cwd: root, env });
    outputs.push(usage.stdout, usage.stderr);
    const report = JSON.parse(usage.stdout) as {
      total: { rows: number; turns: number; usage: Record<string, number> };
    };
    expect(report.total).toMatchObject({
      rows: 2 + mock.sideReported.length,
      turns: 2,
      usage: {
        inputTokens: 930 + side.input,
        outputTokens: 24 + side.output,
        cacheReadTokens: 300,
        cacheCreationTokens: 5,
        reasoningTokens: 0,
      },
    });
    const db = new Database(join(root, 'data', 'the-loop.db'), { readonly: true });
    try {
      const rows = db.prepare('SELECT meter, source_id FROM usage_ledger ORDER BY id').all() as Array<{
        meter: string;
        source_id: string;
      }>;
      expect(new Set(rows.map((r) => r.meter))).toEqual(new Set(['wire']));
      // Keyed by the API message id: a response is one row, however often it is read.
      for (const r of rows) expect(r.source_id).toMatch(/^anthropic:msg_/);
      const turns = db.prepare('SELECT meter, guard FROM turns ORDER BY id').all() as Array<{
        meter: string;
        guard: string;
      }>;
      expect(turns.map((t) => t.meter)).toEqual(['wire', 'wire']);
      expect(JSON.parse(turns[0]?.guard ?? '{}')).toMatchObject({
        sandbox: 'bwrap',
        gateway: { model: true, github: true },
        permissions: 'bypass',
      });
    } finally {
      db.close();
    }
    const list = await runCli(['sessions', 'list'], { cwd: root, env });
    expect(list.stdout).toMatch(new RegExp(`tmux\\s+${TARGET}`));
  }, 300_000);

  it('keeps the canary credential out of argv, the pane, the data dir and the output', async () => {
    const scrollback = await tmux.capturePane(TARGET, { history: true });
    expect(scrollback).not.toContain(canary);
    const panePid = (
      await tmux.must(['list-panes', '-t', `=${TARGET}:`, '-F', '#{pane_pid}'], 'list-panes')
    ).trim();
    const ps = execFileSync('ps', ['-eo', 'pid,ppid,args'], { encoding: 'utf8' });
    expect(ps).toContain(panePid);
    expect(ps).not.toContain(canary);
    expect(readFileSync(join(root, 'record', 'argv.jsonl'), 'utf8')).not.toContain(canary);
    for (const file of allFiles(join(root, 'data'))) {
      expect(readFileSync(file).includes(canary), file).toBe(false);
    }
    for (const out of outputs) expect(out).not.toContain(canary);
    // The launcher deleted the environment file it was given.
    expect(allFiles(join(root, 'data')).filter((f) => /env-.*\.json$/.test(f))).toEqual([]);
  });

  it('pastes outside text as inert text: a bracketed-paste end marker cannot run a command', async () => {
    const marker = join(root, 'pwned');
    const res = await runCli(['run', WI, '--', `hello \u001b[201~\ntouch ${marker}\n`], {
      cwd: root,
      env,
      timeoutMs: 150_000,
    });
    expect(res.code, res.stdout).toBe(0);
    expect(() => statSync(marker)).toThrow();
    // The whole text arrived as ONE prompt: an end-of-paste marker that survived would have ended the
    // paste, and the newline after it would have submitted "hello" alone as a separate turn.
    const last = mock.modelTurns().at(-1)?.body as { messages?: Array<{ role: string; content: unknown }> };
    const userTexts = (last.messages ?? [])
      .filter((m) => m.role === 'user')
      .map((m) => JSON.stringify(m.content));
    const prompt = userTexts.at(-1) ?? '';
    expect(prompt).toContain('hello');
    expect(prompt).toContain(`touch ${marker}`);
    expect(prompt).not.toContain('\\u001b');
  }, 200_000);

  it('types keys into the TUI: literal text with -l, named keys as keys', async () => {
    const typed = await runCli(['sessions', 'keys', WI, 'hello-keys'], { cwd: root, env });
    expect(typed.code, typed.stderr).toBe(0);
    let screen = '';
    for (let i = 0; i < 50 && !screen.includes('hello-keys'); i++) {
      screen = await tmux.capturePane(TARGET);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(screen).toContain('hello-keys');
    const cleared = await runCli(['sessions', 'keys', WI, 'C-u'], { cwd: root, env });
    expect(cleared.stdout).toContain(`sent to ${TARGET}: C-u`);
  });

  it('closing the session ends its tmux session', async () => {
    const processes = await sessionProcesses(tmux, TARGET);
    expect(processes.length).toBeGreaterThan(0);
    const res = await runCli(['sessions', 'close', WI], { cwd: root, env });
    // The engine and everything it started end with the tmux session.
    expect(await waitGone(processes)).toBe(true);
    expect(res.stdout).toContain(`tmux session ${TARGET} ended`);
    expect(await tmux.hasSession(TARGET)).toBe(false);
  });
});

describe('tmux runner driven by webhooks (routing.runner: tmux)', () => {
  const hookSocket = `the-loop-tuiwh-${randomUUID().slice(0, 8)}`;
  const hookTmux = new Tmux({ socket: hookSocket });
  const SECRET = 'webhook-secret-for-tmux-0123456789';
  let root: string;
  let mock: MockApi;
  let daemon: DaemonProcess;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-tuiwh-'));
    mkdirSync(join(root, 'widgets'));
    mock = await startAnthropicMock({
      script: [
        { kind: 'text', text: 'On it: issue 15.', usage: { input: 600, output: 9 } },
        { kind: 'text', text: 'Fixed the empty state.', usage: { input: 700, output: 12 } },
      ],
    });
    const home = prepareClaudeHome(join(root, 'engine'), mock.url);
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        dataDir: 'data',
        webhook: { secret: SECRET },
        defaults: { engine: 'claude', backstopSeconds: 90 },
        routing: { runner: 'tmux', triggers: { labels: ['the-loop'] } },
        repos: { 'acme/widgets': { path: join(root, 'widgets') } },
        tmux: { socket: hookSocket, readySeconds: 60 },
        gateway: { port: await freePort() },
        engines: {
          claude: { binary: realBinary('claude'), env: { ...home.env, CLAUDE_CODE_SANDBOXED: '1' } },
        },
      }),
    );
    daemon = await startDaemonProcess({
      cwd: root,
      env: { THE_LOOP_CONFIG: join(root, 'config.yaml'), ANTHROPIC_AUTH_TOKEN: 'token-for-the-tui-test' },
    });
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    await stopTmuxServer(hookTmux);
    await mock?.close();
    await removeWhenQuiet(root);
  });

  it('starts the TUI on the first webhook and pastes the second as the next turn', async () => {
    const first = await sendDelivery(daemon.webhookUrl, SECRET, 'issues', fixture('issues.labeled'));
    const second = await sendDelivery(
      daemon.webhookUrl,
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect([first.status, second.status]).toEqual([202, 202]);
    const env = { THE_LOOP_CONFIG: join(root, 'config.yaml') };
    let events: Array<{ id: string; status: string }> = [];
    for (let i = 0; i < 600; i++) {
      const list = await runCli(['events', 'list', '--json'], { cwd: root, env });
      events = JSON.parse(list.stdout) as Array<{ id: string; status: string }>;
      if (events.every((e) => e.status === 'done' || e.status === 'failed')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(events.map((e) => e.status)).toEqual(['done', 'done']);
    const show = JSON.parse(
      (await runCli(['sessions', 'show', 'github:acme/widgets#15', '--json'], { cwd: root, env })).stdout,
    ) as {
      session: { runner: string; tmuxTarget: string };
      turns: Array<{ endReason: string; usage: { inputTokens: number } | null }>;
    };
    const widgets = `loop-${workItemSlug(parseWorkItem('github:acme/widgets#15'))}`;
    expect(show.session).toMatchObject({ runner: 'tmux', tmuxTarget: widgets });
    expect(show.turns.map((t) => [t.endReason, t.usage?.inputTokens])).toEqual([
      ['result', 600],
      ['result', 700],
    ]);
    const screen = await hookTmux.capturePane(widgets, { history: true });
    expect(screen).toContain('Fixed the empty state.');
  }, 300_000);
});
