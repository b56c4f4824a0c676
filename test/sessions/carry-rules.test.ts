/** Which files carry a session between hosts, and which a host restores (sessions/carry-rules.ts). */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isSessionFileName, planRestore, sessionFileLookup } from '../../src/sessions/carry-rules.js';

const ENGINE_ID = '0d6f5a8e-2b1c-4e3d-9f7a-6b5c4d3e2f1a';
const CWD = '/work/widgets';
const DIR = '-work-widgets';
const NAME = `projects/${DIR}/${ENGINE_ID}.jsonl`;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe('carry rules', () => {
  it("names the project directory after the cwd as Claude Code does (not a letter or digit → '-')", () => {
    // Observed with Claude Code 2.1.197: /tmp/munge/a.b_c d+e~f → -tmp-munge-a-b-c-d-e-f
    expect(sessionFileLookup('claude-projects', ENGINE_ID, '/tmp/munge/a.b_c d+e~f')).toEqual({
      parent: 'projects',
      dir: { exact: '-tmp-munge-a-b-c-d-e-f' },
      file: `${ENGINE_ID}.jsonl`,
    });
    const long = `/${'x'.repeat(250)}`;
    expect(sessionFileLookup('claude-projects', ENGINE_ID, long)?.dir).toEqual({
      prefix: `-${'x'.repeat(199)}`,
    });
    expect(sessionFileLookup('claude-projects', null, CWD)).toBeUndefined();
    expect(sessionFileLookup('claude-projects', '../x', CWD)).toBeUndefined();
  });

  it('accepts only projects/<the cwd directory>/<the session id>.jsonl', () => {
    expect(isSessionFileName('claude-projects', NAME, ENGINE_ID, CWD)).toBe(true);
    for (const bad of [
      `projects/../${ENGINE_ID}.jsonl`,
      `projects/./${ENGINE_ID}.jsonl`,
      `projects/-other-dir/${ENGINE_ID}.jsonl`,
      `projects/${DIR}/x/${ENGINE_ID}.jsonl`,
      `/projects/${DIR}/${ENGINE_ID}.jsonl`,
      `projects/${DIR}/other.jsonl`,
      `projects/${DIR}\n/${ENGINE_ID}.jsonl`,
      'settings.json',
    ])
      expect(isSessionFileName('claude-projects', bad, ENGINE_ID, CWD), bad).toBe(false);
    expect(isSessionFileName('claude-projects', NAME, null, CWD)).toBe(false);
    // A long cwd: its cut name, then safe characters only.
    const long = `/${'x'.repeat(250)}`;
    const cut = `-${'x'.repeat(199)}`;
    expect(
      isSessionFileName('claude-projects', `projects/${cut}-1a2b/${ENGINE_ID}.jsonl`, ENGINE_ID, long),
    ).toBe(true);
    expect(
      isSessionFileName('claude-projects', `projects/${cut}../${ENGINE_ID}.jsonl`, ENGINE_ID, long),
    ).toBe(false);
  });

  it('restores what another host saved last, keeps the same copy and its own', () => {
    const meta = (hostId: string, digest: string) => ({
      name: NAME,
      digest,
      bytes: 1,
      turnId: 1,
      hostId,
      savedAt: '2026-01-01T00:00:00.000Z',
    });
    const plan = (m: ReturnType<typeof meta>, local: string | null) =>
      planRestore('claude-projects', ENGINE_ID, CWD, [m], new Map([[NAME, local]]), 'b')[0]?.kind;
    expect(plan(meta('a', sha('x')), null)).toBe('restore');
    expect(plan(meta('a', sha('x')), sha('old'))).toBe('restore');
    expect(plan(meta('a', sha('x')), sha('x'))).toBe('same');
    expect(plan(meta('b', sha('x')), sha('newer'))).toBe('ours');
    expect(plan(meta('b', sha('x')), null)).toBe('restore');
    expect(
      planRestore('claude-projects', ENGINE_ID, '/elsewhere', [meta('a', sha('x'))], new Map(), 'b')[0]?.kind,
    ).toBe('refused');
  });
});
