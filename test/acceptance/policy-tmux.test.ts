/**
 * The merge policy enforced before the act in the tmux runner: the real Claude Code TUI (private
 * tmux socket) against the mock, scripted to run `git push origin main` with its Bash tool, in a
 * repository whose `origin` is a local bare repository. The tmux runner's settings file carries the
 * PreToolUse policy hook beside its own hooks: the push is refused before it runs, nothing reaches the
 * remote, and the act is recorded `blocked` from the transcript.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { Tmux } from '../../src/runners/tmux/tmux.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { runCli } from '../helpers/cli.js';
import { remoteHead, repoWithRemote } from '../helpers/git.js';
import { removeWhenQuiet, stopTmuxServer } from '../helpers/tmux.js';
import { realBinary } from './helpers.js';

const socket = `the-loop-policy-${randomUUID().slice(0, 8)}`;
const tmux = new Tmux({ socket });
const WI = 'github:acme/policy-tui#3';

describe('merge policy in the tmux runner: the real Claude Code TUI', () => {
  let root: string;
  let mock: MockApi;
  let env: Record<string, string>;
  let work: string;
  let remote: string;
  let before: string;

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-policy-tui-'));
    ({ work, remote } = repoWithRemote(root, 'work'));
    before = remoteHead(remote);
    mock = await startAnthropicMock({
      script: [
        { kind: 'shell', command: 'git push origin main' },
        { kind: 'text', text: 'The push was refused.' },
      ],
    });
    const home = prepareClaudeHome(join(root, 'engine'), mock.url);
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        dataDir: 'data',
        defaults: { engine: 'claude', runner: 'tmux', backstopSeconds: 90 },
        // The hook alone, against a local remote: the gateway and the sandbox have their own tests.
        gateway: { enabled: false },
        sandbox: { mode: 'none' },
        tmux: { socket, readySeconds: 60 },
        engines: {
          claude: {
            binary: realBinary('claude'),
            env: { ...home.env, CLAUDE_CODE_SANDBOXED: '1', GIT_TERMINAL_PROMPT: '0' },
            // Asked for, but a TUI keeps its transcript meter: the log must say so (invariant 7).
            otel: { enabled: true },
            interactive: {
              args: [
                '--session-id',
                '{sessionId}',
                '--settings',
                '{settingsFile}',
                '--dangerously-skip-permissions',
              ],
            },
          },
        },
      }),
    );
    env = { THE_LOOP_CONFIG: join(root, 'config.yaml'), ANTHROPIC_AUTH_TOKEN: `canary-${randomUUID()}` };
  }, 60_000);

  afterAll(async () => {
    await stopTmuxServer(tmux);
    await mock?.close();
    if (root) await removeWhenQuiet(root);
  });

  it('refuses the push to main before it runs and records it blocked', async () => {
    const res = await runCli(['run', WI, '--cwd', work, '--', 'Push main.'], {
      cwd: root,
      env,
      timeoutMs: 150_000,
    });
    expect(res.code, `stdout:\n${res.stdout}\nstderr:\n${res.stderr}`).toBe(0);
    expect(remoteHead(remote)).toBe(before);
    const acts = JSON.parse((await runCli(['acts', '--json'], { cwd: root, env })).stdout) as Array<{
      kind: string;
      outcome: string;
      verdict: string;
      breach: boolean;
      runner: string;
    }>;
    expect(acts.map((a) => [a.kind, a.outcome, a.verdict, a.breach, a.runner])).toEqual([
      ['git-push', 'blocked', 'deny', false, 'tmux'],
    ]);
    expect(JSON.stringify(mock.modelTurns()[1]?.body)).toContain('[the-loop policy]');
    const show = JSON.parse(
      (await runCli(['sessions', 'show', WI, '--json'], { cwd: root, env })).stdout,
    ) as {
      turns: Array<{ meter: string }>;
    };
    expect(show.turns.map((t) => t.meter)).toEqual(['transcript']);
    expect(readFileSync(join(root, 'data', 'the-loop.log'), 'utf8')).toMatch(
      /otel\.enabled is not used on this runner: the session is metered from its transcript/,
    );
  }, 180_000);
});
