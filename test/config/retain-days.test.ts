import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { configJsonSchema } from '../../src/config/schema.js';
import { LoopError } from '../../src/core/errors.js';

let dir: string;

beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-retain-')));
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

describe('inbox.retainDays', () => {
  it('defaults to 30 days, with or without an inbox section', () => {
    expect(load(undefined).config.inbox.retainDays).toBe(30);
    expect(load('inbox: {}\n').config.inbox.retainDays).toBe(30);
  });

  it.each([0, 1, 7, 3650])('accepts %s (0 keeps bodies forever)', (days) => {
    expect(load(`inbox:\n  retainDays: ${days}\n`).config.inbox.retainDays).toBe(days);
  });

  it.each([
    ['-1', /inbox\.retainDays[\s\S]*0 \(keep bodies forever\) or more days/],
    ['1.5', /inbox\.retainDays[\s\S]*whole number of days/],
    ['3651', /inbox\.retainDays[\s\S]*at most 3650/],
    ['1e12', /inbox\.retainDays[\s\S]*at most 3650/],
    ['"30"', /inbox\.retainDays/],
  ])('refuses retainDays: %s with a clear error', (value, message) => {
    let error: unknown;
    try {
      load(`inbox:\n  retainDays: ${value}\n`);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LoopError);
    expect((error as LoopError).code).toBe('config-invalid');
    expect((error as LoopError).message).toMatch(message);
  });

  it('refuses unknown keys under inbox', () => {
    expect(() => load('inbox:\n  retainDay: 3\n')).toThrow(/retainDay/);
  });

  it('is in the JSON Schema for editors', () => {
    const schema = configJsonSchema() as {
      properties: { inbox: { properties: { retainDays: Record<string, unknown> } } };
    };
    expect(schema.properties.inbox.properties.retainDays).toMatchObject({
      type: 'integer',
      minimum: 0,
      maximum: 3650,
      default: 30,
    });
  });
});
