import { execFileSync, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseWorkItem, workItemSlug } from '../../src/core/work-item.js';
import { Tmux } from '../../src/runners/tmux/tmux.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';
import { removeWhenQuiet, stopTmuxServer } from '../helpers/tmux.js';
import { realBinary } from './helpers.js';

/**
 * The tmux runner's lifecycle with the real Claude Code TUI against the mock API, driven by a real
 * daemon process: a daemon killed (SIGKILL) or stopped (SIGTERM) mid-turn is restarted and adopts
 * the running turn; a hook event of another session is ignored; Escape in the TUI ends a turn as
 * interrupted; a tmux session killed by hand, a TUI that exits, a tmux server killed under the
 * daemon and an engine that exits at startup each give a recorded outcome, and the next delivery
 * works.
 */

const socket = `the-loop-life-${randomUUID().slice(0, 8)}`;
const tmux = new Tmux({ socket });
const SECRET = 'webhook-secret-for-tmux-lifecycle-0123';
const WI = 'github:acme/widgets#15';
const SLUG = workItemSlug(parseWorkItem(WI));
const TARGET = `loop-${SLUG}`;
const HOOK = join(ROOT, 'bin/the-loop-hook.js');

interface Shown {
  session: { id: string; status: string; tmuxTarget: string; engineSessionId: string };
  turns: Array<{
    seq: number;
    status: string;
    endReason: string | null;
    error: string | null;
    usage: { inputTokens: number; outputTokens: number } | null;
  }>;
}

interface ListedSession {
  id: string;
  workItem: string;
  status: string;
  closeReason: string | null;
  closedAt: string | null;
}

async function until<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  ms = 90_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('tmux runner lifecycle: adoption after a restart, interrupts, vanished sessions', () => {
  let root: string;
  let mock: MockApi;
  let daemon: DaemonProcess | undefined;
  let env: Record<string, string>;
  let engineEnv: Record<string, string>;

  const cli = async (args: string[]) => {
    const res = await runCli(args, { cwd: root, env, timeoutMs: 150_000 });
    return res;
  };
  const show = async (ref = WI): Promise<Shown> =>
    JSON.parse((await cli(['sessions', 'show', ref, '--json'])).stdout) as Shown;
  const sessions = async (): Promise<ListedSession[]> =>
    JSON.parse((await cli(['sessions', 'list', '--all', '--json'])).stdout) as ListedSession[];
  const deliveryStatus = async (id: string) =>
    (JSON.parse((await cli(['events', 'show', id, '--json'])).stdout) as { delivery: { status: string } })
      .delivery.status;
  const settled = (id: string) =>
    until(`delivery ${id} to settle`, async () => {
      const status = await deliveryStatus(id);
      return status === 'done' || status === 'failed' ? status : undefined;
    });
  const comment = () =>
    sendDelivery(daemon?.webhookUrl ?? '', SECRET, 'issue_comment', fixture('issue_comment.created'));
  const statePhase = () => {
    const file = join(root, 'data', 'sessions', SLUG, 'state.json');
    if (!existsSync(file)) return undefined;
    return (JSON.parse(readFileSync(file, 'utf8')) as { turn?: { phase: string } }).turn?.phase;
  };
  const startDaemon = async () => {
    daemon = await startDaemonProcess({
      cwd: root,
      env: { ...env, ANTHROPIC_AUTH_TOKEN: 'token-for-lifecycle' },
    });
    return daemon;
  };
  const log = () => readFileSync(join(root, 'data', 'the-loop.log'), 'utf8');

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-life-'));
    mkdirSync(join(root, 'widgets'));
    mock = await startAnthropicMock({
      script: [
        // 1: answered while the daemon that started the turn is dead.
        { kind: 'text', text: 'Adopted answer one.', usage: { input: 800, output: 15 }, delayMs: 7000 },
        // 2: answered after the daemon was stopped with SIGTERM mid-turn.
        { kind: 'text', text: 'Adopted answer two.', usage: { input: 900, output: 16 }, delayMs: 6000 },
        // 3: interrupted with Escape while it streams (Claude Code 2.1.197 writes no record for an
        // interrupt before the first output: it puts the prompt back in the input box).
        { kind: 'text', text: 'Streaming slowly now.', usage: { input: 1, output: 1 }, stallMs: 60_000 },
        // 4: a turn in a new session, after the old one was killed by hand.
        { kind: 'text', text: 'Fresh session answer.', usage: { input: 1000, output: 17 } },
        // 5: the tmux server is killed under this turn.
        { kind: 'text', text: 'Never seen either.', usage: { input: 1, output: 1 }, delayMs: 60_000 },
        // 6: works again afterwards.
        { kind: 'text', text: 'Back again.', usage: { input: 1100, output: 18 } },
      ],
    });
    const home = prepareClaudeHome(join(root, 'engine'), mock.url);
    // The runner answers the first-run dialogs itself (onboarding, folder trust): remove the
    // fixture's answers so this test proves it.
    writeFileSync(join(home.env.CLAUDE_CONFIG_DIR as string, '.claude.json'), '{"numStartups": 1}\n');
    engineEnv = home.env;
    const broken = join(root, 'broken-engine.mjs');
    writeFileSync(
      broken,
      // It shows its credential on screen as it dies: the recorded last screen must not keep it.
      '#!/usr/bin/env node\nconsole.log("boom: this engine cannot start (key " + process.env.ANTHROPIC_AUTH_TOKEN + ")");\nprocess.exit(3);\n',
      {
        mode: 0o755,
      },
    );
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        dataDir: 'data',
        webhook: { secret: SECRET },
        defaults: { engine: 'claude', backstopSeconds: 120 },
        // The daemon is killed while the model answers: through the gateway (in the daemon) that
        // request would be cut, and the engine would retry it against the next daemon. This test is
        // about adopting the TUI's turn, so the engine talks to its API itself here.
        gateway: { enabled: false },
        sandbox: { mode: 'none' },
        dispatch: { closeGraceSeconds: 1 },
        routing: { runner: 'tmux', triggers: { labels: ['the-loop'] } },
        repos: { 'acme/widgets': { path: join(root, 'widgets') } },
        tmux: { socket, readySeconds: 60 },
        engines: {
          claude: {
            binary: realBinary('claude'),
            env: engineEnv,
            // A long pause between paste and Enter: time to kill the daemon in between.
            interactive: {
              args: ['--session-id', '{sessionId}', '--settings', '{settingsFile}'],
              hooks: 'claude-settings',
              transcript: 'claude-jsonl',
              firstRun: 'claude',
              submitDelayMs: 2500,
            },
          },
          broken: {
            binary: broken,
            credentials: [{ env: 'ANTHROPIC_AUTH_TOKEN', kind: 'api-key' }],
            protocol: 'claude-stream-json',
            sessionId: 'assign',
            headless: { args: ['-p'], start: ['--session-id', '{sessionId}'] },
            interactive: {
              args: ['--session-id', '{sessionId}', '--settings', '{settingsFile}'],
              hooks: 'claude-settings',
            },
          },
        },
      }),
    );
    env = { THE_LOOP_CONFIG: join(root, 'config.yaml') };
  }, 60_000);

  afterAll(async () => {
    await daemon?.stop();
    await stopTmuxServer(tmux);
    await mock?.close();
    if (root && !process.env.THE_LOOP_KEEP_TEST_DIR) await removeWhenQuiet(root);
  });

  it('adopts a turn after the daemon is killed mid-turn: its Stop is recorded, nothing is pasted twice', async () => {
    await startDaemon();
    const first = await sendDelivery(daemon?.webhookUrl ?? '', SECRET, 'issues', fixture('issues.labeled'));
    expect(first.status).toBe(202);
    // The prompt reached the model and the engine confirmed it: the turn is in flight.
    await until('the first model request', () => (mock.modelTurns().length >= 1 ? true : undefined));
    await until('the turn to be confirmed', () => (statePhase() === 'submitted' ? true : undefined));
    daemon?.child.kill('SIGKILL');
    await daemon?.stop();
    // The TUI goes on without a daemon.
    expect(await tmux.hasSession(TARGET)).toBe(true);

    await startDaemon();
    // A hook event of another session (same file, as a confused or hostile hook would write it)
    // must not end our turn: the turn still ends on our own Stop, with the model's usage.
    const foreign = spawn(process.execPath, [HOOK, join(root, 'data', 'sessions', SLUG, 'hooks.jsonl')], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    foreign.stdin.end(
      JSON.stringify({ hook_event_name: 'Stop', session_id: randomUUID(), last_assistant_message: 'forged' }),
    );
    await new Promise((r) => foreign.once('exit', r));

    expect(await settled(first.id)).toBe('done');
    const shown = await show();
    expect(
      shown.turns.map((t) => [t.status, t.endReason, t.usage?.inputTokens, t.usage?.outputTokens]),
    ).toEqual([['succeeded', 'result', 800, 15]]);
    // One paste, one model turn: the adopted turn was followed, not run again.
    expect(mock.modelTurns()).toHaveLength(1);
    expect(log()).toMatch(/adopted a running tmux turn/);
    expect(log()).toMatch(/ignored a hook event of another session/);
    const screen = await tmux.capturePane(TARGET, { history: true });
    expect(screen).toContain('Adopted answer one.');
  }, 200_000);

  it('leaves the turn running when the daemon is stopped (SIGTERM) and the next daemon finishes it', async () => {
    const second = await comment();
    await until('the second model request', () => (mock.modelTurns().length >= 2 ? true : undefined));
    await until('the turn to be confirmed', () => (statePhase() === 'submitted' ? true : undefined));
    expect(await daemon?.stop()).toBe(0);
    expect(await deliveryStatus(second.id)).toBe('running');
    await startDaemon();
    expect(await settled(second.id)).toBe('done');
    const shown = await show();
    expect(shown.turns.map((t) => [t.endReason, t.usage?.inputTokens])).toEqual([
      ['result', 800],
      ['result', 900],
    ]);
    expect(mock.modelTurns()).toHaveLength(2);
    // Both adopted turns were read again from their start: the ledger counted each request once.
    const usage = JSON.parse((await cli(['usage', '--json'])).stdout) as {
      total: { rows: number; usage: { inputTokens: number; outputTokens: number } };
    };
    expect(usage.total).toMatchObject({ rows: 2, usage: { inputTokens: 1700, outputTokens: 31 } });
  }, 200_000);

  it('ends a turn interrupted in the TUI (Escape) as interrupted, read from the transcript', async () => {
    const third = await comment();
    await until('the third model request', () => (mock.modelTurns().length >= 3 ? true : undefined));
    // The mock has sent the first half of the answer. Escape interrupts with a record only once the
    // TUI has taken it in (before its first output, Claude Code 2.1.197 puts the prompt back in the
    // input box instead). The screen shows streamed text only when the message completes, but the
    // spinner counts the tokens streamed so far ("Whirring… (0s · ↓ 3 tokens)"): once it counts any,
    // the TUI has the first half.
    await until('the TUI to count streamed tokens', async () =>
      /↓ [1-9]\d* tokens?\b/.test(await tmux.capturePane(TARGET)) ? true : undefined,
    );
    const keys = await cli(['sessions', 'keys', WI, 'Escape']);
    expect(keys.code, keys.stderr).toBe(0);
    expect(await settled(third.id)).toBe('failed');
    const last = (await show()).turns.at(-1);
    expect(last).toMatchObject({ status: 'failed', endReason: 'interrupted' });
    expect(await tmux.hasSession(TARGET)).toBe(true);
  }, 200_000);

  it('marks a session killed by hand while no daemon ran as lost on start; the next delivery starts a new one', async () => {
    const before = await show();
    await daemon?.stop();
    await tmux.killSession(TARGET);
    await startDaemon();
    const lost = (await sessions()).find((s) => s.id === before.session.id);
    expect(lost).toMatchObject({ status: 'lost' });
    expect(lost?.closeReason).toContain(`${TARGET} is gone`);
    expect(lost?.closedAt).toBeTruthy();

    const fourth = await comment();
    expect(await settled(fourth.id)).toBe('done');
    const fresh = await show();
    expect(fresh.session.id).not.toBe(before.session.id);
    expect(fresh.session.status).toBe('active');
    expect(fresh.turns.map((t) => [t.endReason, t.usage?.inputTokens])).toEqual([['result', 1000]]);
  }, 200_000);

  it('records a tmux server killed under a running turn, and works again afterwards', async () => {
    const before = await show();
    const fifth = await comment();
    await until('the fifth model request', () => (mock.modelTurns().length >= 5 ? true : undefined));
    await until('the turn to be confirmed', () => (statePhase() === 'submitted' ? true : undefined));
    await tmux.run(['kill-server']);
    expect(await settled(fifth.id)).toBe('failed');
    const ended = await show(before.session.id);
    expect(ended.session.status).toBe('lost');
    expect(ended.turns.at(-1)).toMatchObject({ status: 'failed', endReason: 'error' });
    expect(ended.turns.at(-1)?.error).toMatch(/vanished/);

    const sixth = await comment();
    expect(await settled(sixth.id)).toBe('done');
    expect((await show()).turns.map((t) => t.usage?.inputTokens)).toEqual([1100]);
  }, 200_000);

  it('marks a session whose engine ended it (/exit → SessionEnd) as ended', async () => {
    const before = await show();
    const keys = await cli(['sessions', 'keys', WI, '/exit', 'Enter']);
    expect(keys.code, keys.stderr).toBe(0);
    await until('the TUI to exit', async () => ((await tmux.hasSession(TARGET)) ? undefined : true));
    // The next delivery notices, records why, and starts a new session.
    const seventh = await comment();
    expect(await settled(seventh.id)).toBe('done');
    const old = (await sessions()).find((s) => s.id === before.session.id);
    expect(old).toMatchObject({ status: 'ended' });
    expect(old?.closeReason).toMatch(/the engine ended its session \(prompt_input_exit\)/);
  }, 200_000);

  it('marks a session whose TUI was cleared (/clear → SessionEnd clear, new id) as ended before pasting', async () => {
    const before = await show();
    const hooksFile = join(root, 'data', 'sessions', SLUG, 'hooks.jsonl');
    const keys = await cli(['sessions', 'keys', WI, '/clear', 'Enter']);
    expect(keys.code, keys.stderr).toBe(0);
    await until('the SessionEnd of /clear', () =>
      readFileSync(hooksFile, 'utf8').includes('"reason":"clear"') ? true : undefined,
    );
    const eighth = await comment();
    expect(await settled(eighth.id)).toBe('done');
    const old = (await sessions()).find((s) => s.id === before.session.id);
    expect(old).toMatchObject({ status: 'ended' });
    expect(old?.closeReason).toMatch(/\(clear\)/);
    const fresh = await show();
    expect(fresh.session.id).not.toBe(before.session.id);
    expect(fresh.turns.map((t) => t.status)).toEqual(['succeeded']);
  }, 200_000);

  it('adopts a turn whose daemon died between the paste and Enter: Enter is pressed, nothing pasted twice', async () => {
    const requests = mock.modelTurns().length;
    const ninth = await comment();
    await until('the prompt to be pasted', () => (statePhase() === 'pasted' ? true : undefined));
    daemon?.child.kill('SIGKILL');
    await daemon?.stop();
    await startDaemon();
    expect(await settled(ninth.id)).toBe('done');
    expect(mock.modelTurns()).toHaveLength(requests + 1);
    // One prompt, once: the last request's last user message holds the comment a single time.
    const body = mock.modelTurns().at(-1)?.body as { messages: Array<{ role: string; content: unknown }> };
    const last = JSON.stringify(body.messages.filter((m) => m.role === 'user').at(-1)?.content);
    expect(last.split('please fix this').length - 1).toBe(1);
    expect((await show()).turns.at(-1)).toMatchObject({ status: 'succeeded', endReason: 'result' });
  }, 200_000);

  it('reports an engine that exits at startup, with its last screen, and keeps no session', async () => {
    const res = await cli([
      'run',
      'github:acme/broken#1',
      '--engine',
      'broken',
      '--runner',
      'tmux',
      '--cwd',
      root,
      '--',
      'hello',
    ]);
    expect(res.code).not.toBe(0);
    const shown = await show('github:acme/broken#1');
    expect(shown.session.status).toBe('lost');
    expect(shown.turns.at(-1)).toMatchObject({ status: 'failed', endReason: 'error' });
    // The status when tmux knows it (it does not always: see Tmux.paneState).
    expect(shown.turns.at(-1)?.error).toMatch(/exited (with status 3 )?before it was ready/);
    expect(shown.turns.at(-1)?.error).toMatch(/boom: this engine cannot start/);
    expect(shown.turns.at(-1)?.error).not.toContain('token-for-lifecycle');
    expect(await tmux.hasSession(`loop-${workItemSlug(parseWorkItem('github:acme/broken#1'))}`)).toBe(false);
  }, 120_000);

  it('answered the first-run dialogs in the engine config dir, keeping its other keys', () => {
    const config = JSON.parse(
      readFileSync(join(engineEnv.CLAUDE_CONFIG_DIR as string, '.claude.json'), 'utf8'),
    ) as {
      numStartups?: number;
      hasCompletedOnboarding?: boolean;
      projects?: Record<string, { hasTrustDialogAccepted?: boolean }>;
    };
    expect(config.hasCompletedOnboarding).toBe(true);
    expect(config.numStartups).toBeGreaterThanOrEqual(1);
    expect(config.projects?.[join(root, 'widgets')]?.hasTrustDialogAccepted).toBe(true);
    // No stray processes of this test's tmux server remain beyond its sessions.
    expect(execFileSync('ps', ['-eo', 'args'], { encoding: 'utf8' })).not.toContain('boom');
  });
});
