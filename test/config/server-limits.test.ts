import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { configJsonSchema } from '../../src/config/schema.js';
import { LoopError } from '../../src/core/errors.js';
import { LISTENER_DEFAULTS, serverLimits } from '../../src/web/limits.js';

let dir: string;
beforeEach(() => {
  dir = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-server-limits-')));
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
  try {
    load(yaml);
  } catch (error) {
    expect(error).toBeInstanceOf(LoopError);
    return error as LoopError;
  }
  throw new Error('expected the config to be refused');
}

describe('server listener limits', () => {
  it('default to the listener defaults (what a config without them gets is what the docs say)', () => {
    const { server } = load(undefined).config;
    expect(server).toMatchObject({
      maxBodyBytes: 25 * 1024 * 1024,
      maxConnections: 1024,
      maxBufferedBytes: 64 * 1024 * 1024,
      headersTimeoutSeconds: 10,
      requestTimeoutSeconds: 20,
    });
    expect(serverLimits(server)).toEqual({
      maxConnections: LISTENER_DEFAULTS.maxConnections,
      maxBufferedBytes: LISTENER_DEFAULTS.maxBufferedBytes,
      headersTimeoutMs: LISTENER_DEFAULTS.headersTimeoutMs,
      requestTimeoutMs: LISTENER_DEFAULTS.requestTimeoutMs,
    });
  });

  it('take values that make sense together, in seconds and bytes', () => {
    const { server } = load(
      'server:\n  maxConnections: 64\n  maxBufferedBytes: 30000000\n  headersTimeoutSeconds: 5\n  requestTimeoutSeconds: 5\n',
    ).config;
    expect(serverLimits(server)).toEqual({
      maxConnections: 64,
      maxBufferedBytes: 30_000_000,
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 5_000,
    });
  });

  it('refuse a body budget that cannot hold one body of the largest size', () => {
    const e = refusal('server:\n  maxBodyBytes: 2000000\n  maxBufferedBytes: 1000000\n');
    expect(e.code).toBe('config-invalid');
    expect(e.message).toMatch(/server\.maxBufferedBytes[\s\S]*at least server\.maxBodyBytes \(2000000\)/);
  });

  it('refuse a header deadline past the request deadline', () => {
    const e = refusal('server:\n  headersTimeoutSeconds: 30\n');
    expect(e.message).toMatch(
      /server\.headersTimeoutSeconds[\s\S]*must not exceed server\.requestTimeoutSeconds \(20\)/,
    );
  });

  it.each([
    ['maxConnections: 0', /server\.maxConnections/],
    ['maxConnections: 100000', /server\.maxConnections/],
    ['headersTimeoutSeconds: 0', /server\.headersTimeoutSeconds/],
    ['requestTimeoutSeconds: 1.5', /server\.requestTimeoutSeconds/],
    ['maxBufferedBytes: "64MB"', /server\.maxBufferedBytes/],
  ])('refuse %s with an error naming the key', (line, message) => {
    expect(refusal(`server:\n  ${line}\n`).message).toMatch(message);
  });

  it('are in the JSON Schema for editors', () => {
    const schema = configJsonSchema() as {
      properties: { server: { properties: Record<string, Record<string, unknown>> } };
    };
    expect(schema.properties.server.properties.maxConnections).toMatchObject({
      type: 'integer',
      default: 1024,
    });
    expect(schema.properties.server.properties.maxBufferedBytes).toMatchObject({ default: 64 * 1024 * 1024 });
    expect(schema.properties.server.properties.requestTimeoutSeconds).toMatchObject({ default: 20 });
  });
});
