/**
 * The PreToolUse policy hook as Claude Code runs it: a real child process (`node
 * bin/the-loop-policy-hook.js <policy-file>`) with the tool call's JSON on stdin. Allowed: exit 0 and
 * nothing printed. Denied: exit 2 and `[the-loop policy] …` on stderr. Anything it cannot read:
 * refused (fails closed).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POLICY_HOOK_MATCHER, readRefusals, writePolicyHook } from '../../src/acts/hook.js';
import { resolvePolicy } from '../../src/acts/policy.js';
import { claudeHookSettings } from '../../src/engines/claude-hooks.js';
import { ROOT } from '../helpers/cli.js';

const SCRIPT = join(ROOT, 'bin/the-loop-policy-hook.js');
let dir: string;
let policyFile: string;
let settingsFile: string;
let command: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-policy-hook-'));
  const hook = writePolicyHook({
    dir: join(dir, 'session'),
    policy: resolvePolicy(undefined, undefined, 'main'),
    workspace: dir,
    node: process.execPath,
    hookScript: SCRIPT,
  });
  settingsFile = hook.settingsFile;
  command = hook.command;
  policyFile = join(dir, 'session', 'policy.json');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(stdin: string | Buffer, args: string[] = [policyFile]) {
  const r = spawnSync(process.execPath, [SCRIPT, ...args], {
    input: stdin,
    encoding: 'utf8',
    env: { PATH: process.env.PATH, SECRET_CANARY: 'canary-hook-SECRET' },
    timeout: 30_000,
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}
const call = (tool: string, input: unknown, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    hook_event_name: 'PreToolUse',
    session_id: 'sess-1',
    cwd: dir,
    tool_name: tool,
    tool_input: input,
    ...extra,
  });

describe('the policy hook process', () => {
  it('writes its policy and settings 0600, with a command of single-quoted absolute paths', () => {
    expect(statSync(policyFile).mode & 0o777).toBe(0o600);
    expect(statSync(settingsFile).mode & 0o777).toBe(0o600);
    const settings = JSON.parse(readFileSync(settingsFile, 'utf8')) as {
      hooks: { PreToolUse: Array<{ matcher: string; hooks: Array<{ command: string }> }> };
    };
    expect(settings.hooks.PreToolUse[0]?.matcher).toBe(POLICY_HOOK_MATCHER);
    expect(settings.hooks.PreToolUse[0]?.hooks[0]?.command).toBe(command);
    expect(command).toBe(`'${process.execPath}' '${SCRIPT}' '${policyFile}'`);
  });

  it('allows what the policy allows: exit 0, nothing printed', () => {
    for (const input of [
      { command: 'git status' },
      { command: 'git push origin topic' },
      { command: 'npm test' },
    ]) {
      const r = run(call('Bash', input));
      expect([r.code, r.stdout, r.stderr], JSON.stringify(input)).toEqual([0, '', '']);
    }
    expect(run(call('Read', { file_path: '/etc/hosts' })).code).toBe(0);
    expect(run(call('Write', { file_path: join(dir, 'src', 'x.ts') })).code).toBe(0);
  });

  it('refuses what it denies: exit 2, the reason on stderr, nothing on stdout', () => {
    for (const [input, reason] of [
      [{ command: 'git push origin main' }, /pushing to the protected branch main/],
      [{ command: 'gh pr merge 1 --squash' }, /merging a pull request is not allowed/],
      [{ command: "sh -c 'npm publish'" }, /publishing a package is not allowed/],
      [{ command: 'cd sub && git push --force origin topic' }, /force-pushing is not allowed/],
    ] as const) {
      const r = run(call('Bash', input));
      expect(r.code, JSON.stringify(input)).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^\[the-loop policy\] /);
      expect(r.stderr).toMatch(reason);
    }
    const write = run(call('Write', { file_path: '/etc/cron.d/x' }));
    expect(write.code).toBe(2);
    expect(write.stderr).toMatch(/writing outside the workspace/);
  });

  it("records each refused call's tool_use_id (the audit's only proof of 'blocked'), not allowed ones", () => {
    run(call('Bash', { command: 'git push origin main' }, { tool_use_id: 'toolu_refused_1' }));
    run(call('Bash', { command: 'git status' }, { tool_use_id: 'toolu_allowed_1' }));
    run(call('Bash', { command: 'git push origin main' }, { tool_use_id: 'bad id; rm -rf /' }));
    const refused = readRefusals(join(dir, 'session'));
    expect(refused.has('toolu_refused_1')).toBe(true);
    expect(refused.has('toolu_allowed_1')).toBe(false);
    expect([...refused].some((id) => id.includes(' '))).toBe(false);
    expect(statSync(join(dir, 'session', 'refusals.jsonl')).mode & 0o777).toBe(0o600);
  });

  it('judges a call the same whatever session it names (a foreign session id gets the same policy)', () => {
    const foreign = run(call('Bash', { command: 'git push origin main' }, { session_id: 'someone-else' }));
    expect(foreign.code).toBe(2);
    const none = run(call('Bash', { command: 'git push origin main' }, { session_id: undefined }));
    expect(none.code).toBe(2);
  });

  it('fails closed: no policy file, an unreadable policy, stdin not JSON, no tool, or too large', () => {
    expect(run(call('Bash', { command: 'ls' }), []).stderr).toMatch(/without its policy file/);
    expect(run(call('Bash', { command: 'ls' }), [join(dir, 'missing.json')]).code).toBe(2);
    expect(run(call('Bash', { command: 'ls' }), ['relative.json']).code).toBe(2);
    const garbage = run('{not json');
    expect([garbage.code, garbage.stdout]).toEqual([2, '']);
    expect(garbage.stderr).toMatch(/not JSON/);
    expect(run('{}').stderr).toMatch(/names no tool/);
    const huge = run(Buffer.alloc(9 * 1024 * 1024, 0x20));
    expect(huge.code).toBe(2);
    expect(huge.stderr).toMatch(/too large to check/);
  });

  it('a command input that is not a string is allowed through as unreadable (recorded, not refused)', () => {
    expect(run(call('Bash', { command: 42 })).code).toBe(0);
    expect(run(call('Bash', null)).code).toBe(0);
  });

  it('never echoes the environment', () => {
    const r = run(call('Bash', { command: 'git push origin main' }));
    expect(r.stderr + r.stdout).not.toContain('canary-hook-SECRET');
  });
});

describe('the tmux runner settings', () => {
  it('register the policy hook beside the turn-accounting hooks', () => {
    const settings = claudeHookSettings({
      node: process.execPath,
      hookScript: join(ROOT, 'bin/the-loop-hook.js'),
      eventsFile: join(dir, 'hooks.jsonl'),
      preToolUse: { matcher: POLICY_HOOK_MATCHER, command },
    });
    expect(settings.hooks.PreToolUse).toEqual([
      { matcher: POLICY_HOOK_MATCHER, hooks: [{ type: 'command', command, timeout: 30 }] },
    ]);
    expect(Object.keys(settings.hooks)).toEqual(
      expect.arrayContaining(['Stop', 'SessionStart', 'PreToolUse']),
    );
  });
});
