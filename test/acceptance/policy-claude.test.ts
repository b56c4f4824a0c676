/**
 * The merge policy enforced before the act, with the real Claude Code CLI (process runner) against
 * the mock Anthropic API, scripted to run `gh pr merge 1` and then `git push origin main` with its
 * Bash tool, in a test repository whose `origin` is a local bare repository (`gh` is a stand-in that
 * records its argv and, for a merge, pushes to main — GitHub is not reachable here).
 * - A policy forbidding both: the PreToolUse hook refuses them, nothing reaches the remote (checked
 *   with `git ls-remote`), the stand-in never ran, and both acts are recorded `blocked`.
 * - A permissive policy: both run, the remote moves, and both acts are recorded `succeeded`.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { ROOT, runCli } from '../helpers/cli.js';
import { git, remoteHead, repoWithRemote } from '../helpers/git.js';
import { realBinary } from './helpers.js';

interface Run {
  root: string;
  work: string;
  remote: string;
  ghLog: string;
  mock: MockApi;
  mainBefore: string;
  mainAfter: string;
  localHead: string;
  stdout: string;
  acts: Array<{ kind: string; outcome: string; verdict: string; breach: boolean; command: string }>;
  show: { session: { hold: unknown }; acts: unknown[] };
  canary: string;
  dataDir: string;
  cleanup: () => Promise<void>;
}

async function runPolicy(policy: Record<string, unknown> | undefined): Promise<Run> {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-policy-'));
  const bin = join(root, 'bin');
  mkdirSync(bin);
  const { work, remote } = repoWithRemote(root, 'work');
  const mainBefore = remoteHead(remote);
  // `gh` on the engine's PATH is the stand-in.
  const gh = join(bin, 'gh');
  symlinkSync(join(ROOT, 'test/fixtures/bin/fake-gh.mjs'), gh);
  chmodSync(join(ROOT, 'test/fixtures/bin/fake-gh.mjs'), 0o755);
  const ghLog = join(root, 'gh.log');

  const mock = await startAnthropicMock({
    script: [
      { kind: 'shell', command: 'gh pr merge 1 --squash' },
      { kind: 'shell', command: 'git push origin main' },
      { kind: 'text', text: 'Done.' },
    ],
  });
  const home = prepareClaudeHome(join(root, 'engine'), mock.url);
  const canary = `canary-policy-${Math.random().toString(36).slice(2)}-SECRET`;
  const configPath = join(root, 'config.yaml');
  writeFileSync(
    configPath,
    stringify({
      dataDir: 'data',
      defaults: { engine: 'claude', backstopSeconds: 120, killGraceSeconds: 2 },
      // The hook alone, against a local remote: the gateway and the sandbox have their own tests.
      gateway: { enabled: false },
      sandbox: { mode: 'none' },
      ...(policy ? { policy } : {}),
      engines: {
        claude: {
          binary: realBinary('claude'),
          env: { ...home.env, FAKE_GH_LOG: ghLog, GIT_TERMINAL_PROMPT: '0' },
          extraArgs: ['--dangerously-skip-permissions'],
        },
      },
    }),
  );
  const env = {
    [home.credentialEnv]: canary,
    THE_LOOP_CONFIG: configPath,
    PATH: `${bin}:${process.env.PATH}`,
  };
  const wi = 'github:acme/policy-demo#1';
  const res = await runCli(['run', wi, '--cwd', work, '--', 'Merge PR 1 and push main.'], {
    cwd: root,
    env,
    timeoutMs: 150_000,
  });
  expect(res.code, `stdout:\n${res.stdout}\nstderr:\n${res.stderr}`).toBe(0);
  const acts = await runCli(['acts', '--json'], { cwd: root, env });
  expect(acts.code, acts.stderr).toBe(0);
  const show = await runCli(['sessions', 'show', wi, '--json'], { cwd: root, env });
  return {
    root,
    work,
    remote,
    ghLog,
    mock,
    mainBefore,
    mainAfter: remoteHead(remote),
    localHead: git(work, 'rev-parse', 'HEAD'),
    stdout: res.stdout + acts.stdout + show.stdout + res.stderr + acts.stderr,
    acts: (JSON.parse(acts.stdout) as Run['acts']).reverse(),
    show: JSON.parse(show.stdout) as Run['show'],
    canary,
    dataDir: join(root, 'data'),
    cleanup: async () => {
      await mock.close();
      rmSync(root, { recursive: true, force: true });
    },
  };
}

describe('merge policy with the real Claude Code CLI: the PreToolUse hook', () => {
  let strict: Run;
  let permissive: Run;
  beforeAll(async () => {
    // The default policy: main is protected, PR merges are denied.
    strict = await runPolicy(undefined);
    permissive = await runPolicy({ acts: { 'pr-merge': 'allow', 'git-push': 'allow' } });
  }, 300_000);
  afterAll(async () => {
    await strict?.cleanup();
    await permissive?.cleanup();
  });

  it('a forbidding policy: both refused before they ran, nothing reached the remote, both recorded blocked', () => {
    expect(strict.mainAfter).toBe(strict.mainBefore);
    expect(strict.mainAfter).not.toBe(strict.localHead);
    expect(existsSync(strict.ghLog)).toBe(false);
    expect(strict.acts.map((a) => [a.kind, a.outcome, a.verdict, a.breach])).toEqual([
      ['pr-merge', 'blocked', 'deny', false],
      ['git-push', 'blocked', 'deny', false],
    ]);
    // The agent was told why (the refusal is the tool result of the next model request).
    const second = JSON.stringify(strict.mock.modelTurns()[1]?.body);
    expect(second).toContain('[the-loop policy]');
    // Blocked is not a breach: the session is not held.
    expect(strict.show.session.hold).toBeNull();
    expect(strict.show.acts).toHaveLength(2);
  });

  it('a permissive policy: both ran, the remote moved, both recorded succeeded', () => {
    expect(readFileSync(permissive.ghLog, 'utf8')).toContain('"merge"');
    expect(permissive.mainAfter).toBe(permissive.localHead);
    expect(permissive.acts.map((a) => [a.kind, a.outcome, a.verdict, a.breach])).toEqual([
      ['pr-merge', 'succeeded', 'allow', false],
      ['git-push', 'succeeded', 'allow', false],
    ]);
  });

  it('keeps the credential out of the acts, the database and the output', () => {
    for (const run of [strict, permissive]) {
      expect(run.stdout).not.toContain(run.canary);
      for (const name of ['the-loop.db', 'the-loop.db-wal', 'the-loop.log']) {
        const path = join(run.dataDir, name);
        if (existsSync(path)) expect(readFileSync(path).includes(run.canary), name).toBe(false);
      }
    }
  });
});
