import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { DEFAULT_ACT_RULES, decide, isProtected, resolvePolicy } from '../../src/acts/policy.js';
import { ACT_KINDS, type ClassifiedAct } from '../../src/acts/types.js';
import { loadConfig } from '../../src/config/load.js';
import { LoopError } from '../../src/core/errors.js';

const act = (kind: ClassifiedAct['kind'], detail: ClassifiedAct['detail'] = {}): ClassifiedAct => ({
  kind,
  command: `${kind} …`,
  detail,
});

describe('resolvePolicy', () => {
  it('defaults: the default branch protected; a rule for every kind', () => {
    const p = resolvePolicy(undefined, undefined, 'main');
    expect(p.protectedBranches).toEqual(['main']);
    expect(Object.keys(p.rules).sort()).toEqual([...ACT_KINDS].sort());
    expect(p.rules['pr-merge']).toBe('deny');
    expect(p.rules['git-push']).toBe('deny-protected');
    expect(p.rules['unknown-git-act']).toBe('allow');
  });

  it('the repository on top of the global policy: rules per kind, protected branches replaced', () => {
    const p = resolvePolicy(
      { protectedBranches: ['main', 'release/*'], acts: { 'pr-merge': 'allow', 'git-push': 'deny' } },
      { protectedBranches: ['trunk'], acts: { 'git-push': 'allow' } },
      'ignored',
    );
    expect(p.protectedBranches).toEqual(['trunk']);
    expect(p.rules['pr-merge']).toBe('allow');
    expect(p.rules['git-push']).toBe('allow');
    expect(p.rules['package-publish']).toBe(DEFAULT_ACT_RULES['package-publish']);
  });
});

describe('decide', () => {
  const policy = resolvePolicy({ protectedBranches: ['main', 'release/*'] }, undefined, 'main');

  it('deny-protected: a push to a protected branch (by name or pattern) is denied; elsewhere allowed', () => {
    expect(decide(act('git-push', { branches: ['main'] }), policy)).toMatchObject({
      verdict: 'deny',
      rule: 'git-push: deny-protected',
    });
    expect(decide(act('git-push', { branches: ['release/2.0'] }), policy).verdict).toBe('deny');
    expect(decide(act('git-push', { branches: ['feature/x'] }), policy).verdict).toBe('allow');
    expect(decide(act('git-push', { protected: true }), policy).verdict).toBe('deny');
    expect(decide(act('git-merge', { into: 'main' }), policy).verdict).toBe('deny');
    expect(decide(act('git-merge', { into: 'topic' }), policy).verdict).toBe('allow');
  });

  it('deny-protected: an unknown destination or every branch is denied, with a hint to name the branch', () => {
    const unknown = decide(act('git-push', { protectedUnknown: true }), policy);
    expect(unknown.verdict).toBe('deny');
    expect(unknown.reason).toMatch(/name the branch/);
    expect(decide(act('git-push', { allBranches: true }), policy).verdict).toBe('deny');
  });

  it('deny and allow rules, with a reason the agent can read', () => {
    const merge = decide(act('pr-merge', { pr: '1' }), policy);
    expect(merge).toMatchObject({ verdict: 'deny', rule: 'pr-merge: deny' });
    expect(merge.reason).toBe('merging a pull request is not allowed in this repository');
    expect(decide(act('unknown-git-act'), policy).verdict).toBe('allow');
  });

  it('isProtected: exact names and * patterns; regex characters in names are literal', () => {
    expect(isProtected('main', ['main'])).toBe(true);
    expect(isProtected('mainline', ['main'])).toBe(false);
    expect(isProtected('release/1.2', ['release/*'])).toBe(true);
    expect(isProtected('releaseX', ['release.*'])).toBe(false);
    expect(isProtected('a+b', ['a+b'])).toBe(true);
  });
});

describe('policy in the config file', () => {
  const load = (config: unknown) => {
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-policy-config-'));
    try {
      writeFileSync(join(dir, 'config.yaml'), stringify(config));
      return loadConfig({ cwd: dir, env: {}, configPath: join(dir, 'config.yaml') });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it('accepts a policy at the top and per repository', () => {
    const loaded = load({
      policy: { protectedBranches: ['main'], acts: { 'pr-merge': 'allow' } },
      repos: {
        'acme/api': { path: '/srv/api', defaultBranch: 'trunk', policy: { acts: { 'git-push': 'deny' } } },
      },
    });
    expect(loaded.config.policy?.acts).toEqual({ 'pr-merge': 'allow' });
    expect(loaded.config.repos['acme/api']?.defaultBranch).toBe('trunk');
  });

  it('refuses an unknown act kind, an unknown rule, and a bad branch pattern, naming where', () => {
    for (const [policy, where] of [
      [{ acts: { 'git-yeet': 'deny' } }, /policy\.acts/],
      [{ acts: { 'git-push': 'maybe' } }, /policy\.acts\.git-push/],
      [{ protectedBranches: ['has space'] }, /policy\.protectedBranches/],
      [{ surprise: true }, /policy/],
    ] as const) {
      let error: unknown;
      try {
        load({ policy });
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(policy)).toBeInstanceOf(LoopError);
      expect((error as LoopError).message).toMatch(where);
    }
  });
});
