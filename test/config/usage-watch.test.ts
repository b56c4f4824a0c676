import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { configJsonSchema } from '../../src/config/schema.js';
import { LoopError } from '../../src/core/errors.js';

let dir: string;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-usage-cfg-')));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function load(yaml: string | undefined) {
  if (yaml !== undefined) {
    mkdirSync(join(dir, '.the-loop'), { recursive: true });
    writeFileSync(join(dir, '.the-loop/config.yaml'), yaml);
  }
  return loadConfig({ cwd: dir, env: {} });
}

function refusal(yaml: string): LoopError {
  let error: unknown;
  try {
    load(yaml);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(LoopError);
  expect((error as LoopError).code).toBe('config-invalid');
  return error as LoopError;
}

describe('usage: (transcripts watched by the daemon)', () => {
  it('defaults: no extra directory, Claude Code watched, a recheck every 30 s', () => {
    expect(load(undefined).config.usage).toEqual({ watch: [], watchClaude: true, recheckSeconds: 30 });
    expect(load('usage: {}\n').config.usage.watch).toEqual([]);
  });

  it('takes directories as written (absolute, ~/…, relative: resolved by the daemon)', () => {
    const usage = load('usage:\n  watch: [/srv/transcripts, ~/more, ../elsewhere]\n  watchClaude: false\n')
      .config.usage;
    expect(usage.watch).toEqual(['/srv/transcripts', '~/more', '../elsewhere']);
    expect(usage.watchClaude).toBe(false);
  });

  it.each([
    ['usage:\n  watch: /one/dir\n', /usage\.watch/],
    ['usage:\n  watch: [""]\n', /usage\.watch[\s\S]*a directory, not an empty string/],
    ['usage:\n  watch: [~root/x]\n', /usage\.watch[\s\S]*~user is not supported/],
    ['usage:\n  watch: ["a\\0b"]\n', /usage\.watch[\s\S]*no NUL or line break/],
    ['usage:\n  watch: ["a\\nb"]\n', /usage\.watch[\s\S]*no NUL or line break/],
    [
      `usage:\n  watch: [${Array.from({ length: 101 }, (_, i) => `/d${i}`).join(', ')}]\n`,
      /at most 100 directories/,
    ],
    [`usage:\n  watch: [/${'x'.repeat(5000)}]\n`, /at most 4096 characters/],
    ['usage:\n  watch: [3]\n', /usage\.watch/],
    ['usage:\n  watchClaude: "no"\n', /usage\.watchClaude/],
    ['usage:\n  recheckSeconds: 0\n', /usage\.recheckSeconds/],
    ['usage:\n  watchDirs: [/x]\n', /watchDirs/],
  ])('refuses %j with a clear error', (yaml, message) => {
    expect(refusal(yaml).message).toMatch(message);
  });

  it('is in the JSON Schema for editors', () => {
    const schema = configJsonSchema() as {
      properties: { usage: { properties: Record<string, Record<string, unknown>> } };
    };
    expect(schema.properties.usage.properties.watch).toMatchObject({ type: 'array', maxItems: 100 });
    expect(schema.properties.usage.properties.watchClaude).toMatchObject({ type: 'boolean', default: true });
  });
});
