/** Which files carry a session between hosts, and which a host restores (sessions/carry-rules.ts). */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isSessionFileName, planRestore } from '../../src/sessions/carry-rules.js';

const ENGINE_ID = '0d6f5a8e-2b1c-4e3d-9f7a-6b5c4d3e2f1a';
const DIR = '-work-widgets';
const NAME = `projects/${DIR}/${ENGINE_ID}.jsonl`;
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

describe('carry rules', () => {
  it('accepts only projects/<one safe dir>/<the session id>.jsonl', () => {
    expect(isSessionFileName('claude-projects', NAME, ENGINE_ID)).toBe(true);
    for (const bad of [
      `projects/../${ENGINE_ID}.jsonl`,
      `projects/./${ENGINE_ID}.jsonl`,
      `projects/a/b/${ENGINE_ID}.jsonl`,
      `/projects/${DIR}/${ENGINE_ID}.jsonl`,
      `projects/${DIR}/other.jsonl`,
      `projects/${DIR}\n/${ENGINE_ID}.jsonl`,
      `settings.json`,
    ])
      expect(isSessionFileName('claude-projects', bad, ENGINE_ID), bad).toBe(false);
    expect(isSessionFileName('claude-projects', NAME, null)).toBe(false);
    expect(isSessionFileName('claude-projects', 'projects/x/..jsonl', '..')).toBe(false);
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
      planRestore('claude-projects', ENGINE_ID, [m], new Map([[NAME, local]]), 'b')[0]?.kind;
    expect(plan(meta('a', sha('x')), null)).toBe('restore');
    expect(plan(meta('a', sha('x')), sha('old'))).toBe('restore');
    expect(plan(meta('a', sha('x')), sha('x'))).toBe('same');
    expect(plan(meta('b', sha('x')), sha('newer'))).toBe('ours');
    expect(plan(meta('b', sha('x')), null)).toBe('restore');
  });
});
