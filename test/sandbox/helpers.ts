import { spawn } from 'node:child_process';
import { mkdtempSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { detectBwrap } from '../../src/sandbox/detect.js';

export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');
/**
 * The repository (its probe scripts, node_modules): under /tmp — a CI checkout may be — the private
 * /tmp hides it unless it is re-exposed read-only, as the product re-exposes its own install.
 */
const REPO = realpathSync(join(dirname(fileURLToPath(import.meta.url)), '../..'));
export const REPO_READ_ONLY: string[] = REPO.startsWith('/tmp/') ? [REPO] : [];
export const PROBE = join(FIXTURES, 'probe.mjs');

/** bubblewrap here, or why the real-bwrap tests are skipped (said in the suite's name). */
export const bwrap = detectBwrap();
export const BWRAP = bwrap.available ? bwrap.path : '/nonexistent/bwrap';
export const SUITE = bwrap.available ? 'real bwrap' : `real bwrap — SKIPPED: ${bwrap.reason} (${bwrap.hint})`;

/** A temp dir under /tmp, by its real path: it is hidden by the private /tmp unless re-exposed. */
export const tempRoot = (prefix: string) => realpathSync(mkdtempSync(join(tmpdir(), prefix)));

export type ProbeOp = Record<string, unknown> & { op: string };
export type ProbeResult = { ok: true; value: unknown } | { ok: false; code: string };

/** Run the probe script inside bwrap with `argv` (ending in `--`) and this exact environment. */
export function probe(argv: string[], ops: ProbeOp[], env: Record<string, string>): Promise<ProbeResult[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(BWRAP, [...argv, process.execPath, PROBE, JSON.stringify(ops)], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      out += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      err += c;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        resolve(JSON.parse(out) as ProbeResult[]);
      } catch {
        reject(new Error(`probe failed (exit ${code}): ${err.trim() || out.trim()}`));
      }
    });
  });
}

/** Poll until `check` holds (a bounded wait, not a timing assertion). */
export async function until(check: () => boolean, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}
