import { describe, expect, it } from 'vitest';
import { decodeEntry, encodeEntry } from '../../src/config/cache-codec.js';

describe('the config cache codec (JSON, undefined settings put back)', () => {
  it('gives back exactly what it was given, undefined values included (nested, in arrays)', () => {
    const entry = {
      format: 'f',
      config: {
        console: { publicOrigin: undefined, port: 7070 },
        list: [1, undefined, { a: undefined, b: 'x' }],
        text: 'quote " backslash \\ newline \n emoji 🙂 nul \u0000',
        empty: {},
        zero: 0,
        flag: false,
        none: null,
      },
      engines: { claude: { args: ['-p'], env: { A: undefined } } },
    };
    const bytes = encodeEntry(entry);
    expect(bytes).not.toBeNull();
    const back = decodeEntry(bytes as Buffer) as typeof entry;
    expect(back).toStrictEqual(entry);
    expect(Object.hasOwn(back.config.console, 'publicOrigin')).toBe(true);
    expect(Object.hasOwn(back.engines.claude.env, 'A')).toBe(true);
  });

  it('declines what JSON would change: dates, maps, sets, non-finite numbers, -0, functions, bigints', () => {
    for (const odd of [
      new Date(0),
      new Map([[1, 2]]),
      new Set([1]),
      Number.NaN,
      Number.POSITIVE_INFINITY,
      -0,
      () => 1,
      10n,
      /re/,
    ]) {
      expect(encodeEntry({ config: { odd } }), String(odd)).toBeNull();
    }
  });

  it('declines an entry whose undefined setting sits under a prototype-shaped key', () => {
    // An own key named like the prototype accessor (as JSON.parse makes it), holding an undefined.
    const hostile = JSON.parse('{"config":{"__proto__":{"x":1}}}') as { config: object };
    const own = Object.getOwnPropertyDescriptor(hostile.config, '__proto__')?.value as Record<
      string,
      unknown
    >;
    own.y = undefined;
    expect(encodeEntry(hostile)).toBeNull();
    expect(encodeEntry({ config: { constructor: { y: undefined } } })).toBeNull();
  });

  it('refuses text that is not an entry, and never reaches a prototype', () => {
    for (const text of ['', 'null', '[1]', '"x"', '{"a":1}', '{"undefinedAt":"x"}', '{"undefinedAt":[[]]}']) {
      expect(() => decodeEntry(text), text).toThrow();
    }
    expect(() => decodeEntry('{"config":{},"undefinedAt":[["__proto__","polluted"]]}')).toThrow();
    expect(() => decodeEntry('{"config":{},"undefinedAt":[["config","constructor","prototype"]]}')).toThrow();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // A path whose parent is missing puts nothing anywhere.
    expect(decodeEntry('{"config":{},"undefinedAt":[["config","a","b"]]}')).toStrictEqual({ config: {} });
  });
});
