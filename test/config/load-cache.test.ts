import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readConfigText } from '../../src/config/config-file.js';
import { type LoadOptions, loadConfig } from '../../src/config/load.js';
import {
  type ConfigCache,
  configCacheFor,
  loadConfigCached,
  MAX_ENTRIES,
  readEntry,
} from '../../src/config/load-cache.js';

let dir: string;
let cache: ConfigCache;
const CONFIG = '.the-loop/config.yaml';

const HOOK = 'hook-canary-0123456789abcdef';
const KEY = 'sk-ant-canary-0123456789';
const GH = 'ghp_canary0123456789';
const OTLP = 'Authorization=Bearer otlp-canary-0123456789';
const FULL = `defaults:
  engine: claude
  cwd: env:WORK
webhook:
  secret: env:HOOK
credentials:
  github: env:GH
engines:
  claude:
    env:
      ANTHROPIC_API_KEY: env:KEY
      DEBUG_LEVEL: "2"
    otel:
      enabled: true
      env:
        OTEL_EXPORTER_OTLP_HEADERS: env:OTLP_AUTH
  mine:
    binary: env:MY_AGENT
    protocol: text
    headless:
      args: ["-p", "{prompt}"]
    sessionId: none
repos:
  acme/widgets:
    path: ../widgets
    engine: mine
`;
const ENV = { WORK: '/srv/work', MY_AGENT: 'my-agent', HOOK, KEY, GH, OTLP_AUTH: OTLP };

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-config-cache-'));
  cache = { dir: join(dir, 'cache'), codeId: 'code-1' };
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function writeConfig(text: string): void {
  mkdirSync(join(dir, '.the-loop'), { recursive: true });
  writeFileSync(join(dir, CONFIG), text);
}
const options = (env: Record<string, string> = ENV): LoadOptions => ({ cwd: dir, env });
const entries = () => (statSafe(cache.dir) ? readdirSync(cache.dir).filter((n) => n.endsWith('.bin')) : []);
const statSafe = (path: string) => statSync(path, { throwIfNoEntry: false });
const hit = (env: Record<string, string> = ENV) =>
  readEntry(cache, readConfigText(options(env)), env) !== null;

describe('the validated-config cache', () => {
  it('a miss and then a hit both give exactly what loadConfig gives', async () => {
    writeConfig(FULL);
    const expected = loadConfig(options());
    expect(hit()).toBe(false);
    expect(await loadConfigCached(options(), cache)).toStrictEqual(expected);
    expect(hit()).toBe(true);
    expect(await loadConfigCached(options(), cache)).toStrictEqual(expected);
    // No file: the defaults, cached too.
    rmSync(join(dir, CONFIG));
    expect(await loadConfigCached(options({}), cache)).toStrictEqual(loadConfig(options({})));
    expect(await loadConfigCached(options({}), cache)).toStrictEqual(loadConfig(options({})));
  });

  it('never writes a secret read through env: — blanked, and put back from the environment on use', async () => {
    writeConfig(FULL);
    await loadConfigCached(options(), cache);
    const [name] = entries();
    expect(name).toBeDefined();
    const bytes = readFileSync(join(cache.dir, name ?? ''));
    for (const secret of [HOOK, KEY, GH]) {
      for (const encoding of ['latin1', 'utf16le', 'utf8'] as const)
        expect(bytes.includes(Buffer.from(secret, encoding))).toBe(false);
    }
    // Nor any other value read through env: (a header with a token in it, a path).
    for (const value of [OTLP, '/srv/work']) expect(bytes.includes(Buffer.from(value, 'latin1'))).toBe(false);
    const loaded = await loadConfigCached(options(), cache);
    expect(loaded.config.webhook.secret).toBe(HOOK);
    expect(loaded.engines.claude?.env.ANTHROPIC_API_KEY).toBe(KEY);
    expect(loaded.engines.claude?.otel?.env?.OTEL_EXPORTER_OTLP_HEADERS).toBe(OTLP);
    expect(loaded.config.defaults.cwd).toBe('/srv/work');
    expect(loaded.secretValues).toStrictEqual(loadConfig(options()).secretValues);
    expect(statSync(cache.dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(cache.dir, name ?? '')).mode & 0o777).toBe(0o600);
  });

  it('a file with a secret written in it is never cached', async () => {
    writeConfig(`webhook:\n  secret: ${HOOK}\n`);
    const loaded = await loadConfigCached(options({}), cache);
    expect(loaded.literalSecrets).toStrictEqual(['webhook.secret']);
    expect(entries()).toStrictEqual([]);
  });

  it('is not used when the file, an env value, a secret or the code changed', async () => {
    writeConfig(FULL);
    await loadConfigCached(options(), cache);
    expect(hit()).toBe(true);
    expect(hit({ ...ENV, MY_AGENT: 'their-agent' })).toBe(false);
    expect(hit({ ...ENV, KEY: `${KEY}-rotated` })).toBe(false);
    const rotated = await loadConfigCached(options({ ...ENV, KEY: `${KEY}-rotated` }), cache);
    expect(rotated.engines.claude?.env.ANTHROPIC_API_KEY).toBe(`${KEY}-rotated`);
    expect(readEntry({ ...cache, codeId: 'code-2' }, readConfigText(options()), ENV)).toBeNull();
    // Another build keeps its own entry beside this one's.
    const other = { ...cache, codeId: 'code-2' };
    await loadConfigCached(options(), other);
    expect(readEntry(other, readConfigText(options()), ENV)).not.toBeNull();
    expect(hit({ ...ENV, KEY: `${KEY}-rotated` })).toBe(true);
    writeConfig(FULL.replace('DEBUG_LEVEL: "2"', 'DEBUG_LEVEL: "3"'));
    expect(hit()).toBe(false);
    expect((await loadConfigCached(options(), cache)).engines.claude?.env.DEBUG_LEVEL).toBe('3');
  });

  it('errors are never cached: an unset variable or an invalid file fails as loadConfig fails, each time', async () => {
    writeConfig(FULL);
    await loadConfigCached(options(), cache);
    const { HOOK: _unset, ...without } = ENV;
    const expected = (() => {
      try {
        loadConfig(options(without));
      } catch (error) {
        return error;
      }
    })();
    expect(expected).toBeInstanceOf(Error);
    await expect(loadConfigCached(options(without), cache)).rejects.toThrow((expected as Error).message);
    writeConfig('defaults:\n  engine: 42\n');
    const message = (() => {
      try {
        loadConfig(options());
      } catch (error) {
        return (error as Error).message;
      }
    })();
    for (let i = 0; i < 2; i++) await expect(loadConfigCached(options(), cache)).rejects.toThrow(message);
  });

  it('a damaged, hostile or foreign entry is a miss, and is replaced', async () => {
    writeConfig(FULL);
    await loadConfigCached(options(), cache);
    const [name] = entries();
    const file = join(cache.dir, name ?? '');
    const good = readFileSync(file);
    const real = JSON.parse(good.toString('utf8')) as Record<string, unknown>;
    const serialize = (value: unknown) => Buffer.from(JSON.stringify(value));
    const bad = [
      // The undefined settings' paths: missing, not paths, or reaching a prototype.
      serialize({ ...real, undefinedAt: undefined }),
      serialize({ ...real, undefinedAt: 'config' }),
      serialize({ ...real, undefinedAt: [[]] }),
      serialize({ ...real, undefinedAt: [['__proto__', 'polluted']] }),
      serialize({ ...real, undefinedAt: [['config', 'constructor', 'prototype']] }),
      // Its digest still right, its other fields not.
      serialize({ ...real, leaves: [null] }),
      serialize({ ...real, leaves: [{ root: 'config', path: [{}], name: 'KEY' }] }),
      serialize({ ...real, secretRefs: [42] }),
      serialize({ ...real, config: 'a string' }),
      Buffer.from('not JSON'),
      Buffer.from('{"format":"the-loop-config-cache-3","undefinedAt":[]}'),
      good.subarray(0, good.length >> 1),
      serialize({ format: 'the-loop-config-cache-1', config: null }),
      serialize([1, 2, 3]),
      Buffer.alloc(0),
    ];
    for (const bytes of bad) {
      writeFileSync(file, bytes);
      expect(hit()).toBe(false);
      expect(await loadConfigCached(options(), cache)).toStrictEqual(loadConfig(options()));
      expect(hit()).toBe(true);
    }
  });

  it('an entry someone else could have written is not used (group- or world-writable file or directory, a link)', async () => {
    writeConfig(FULL);
    await loadConfigCached(options(), cache);
    const [name] = entries();
    const file = join(cache.dir, name ?? '');
    chmodSync(file, 0o620);
    expect(hit()).toBe(false);
    chmodSync(file, 0o600);
    expect(hit()).toBe(true);
    chmodSync(cache.dir, 0o702);
    expect(hit()).toBe(false);
    chmodSync(cache.dir, 0o700);
    renameSync(file, `${file}.real`);
    symlinkSync(`${file}.real`, file);
    expect(hit()).toBe(false);
    // A FIFO in its place: a miss at once, never a read that blocks.
    rmSync(file);
    expect(spawnSync('mkfifo', [file]).status).toBe(0);
    expect(hit()).toBe(false);
    rmSync(file);
    symlinkSync(`${file}.real`, file);
    // And it is replaced by a file of ours (rename over the link), not written through it.
    await loadConfigCached(options(), cache);
    expect(lstatSync(file).isFile()).toBe(true);
    expect(hit()).toBe(true);
  });

  it('keeps at most MAX_ENTRIES entries, the newest', async () => {
    for (let i = 0; i < MAX_ENTRIES + 3; i++) {
      const sub = join(dir, `p${i}`);
      mkdirSync(join(sub, '.the-loop'), { recursive: true });
      writeFileSync(join(sub, CONFIG), `defaults:\n  backstopSeconds: ${60 + i}\n`);
      await loadConfigCached({ cwd: sub, env: {} }, cache);
    }
    expect(entries()).toHaveLength(MAX_ENTRIES);
    // The last one written is kept.
    const last = join(dir, `p${MAX_ENTRIES + 2}`);
    expect(readEntry(cache, readConfigText({ cwd: last, env: {} }), {})).not.toBeNull();
  });

  it('an unwritable cache directory costs only time', async () => {
    writeConfig(FULL);
    writeFileSync(join(dir, 'file'), '');
    const blocked = { dir: join(dir, 'file', 'cache'), codeId: 'x' };
    expect(await loadConfigCached(options(), blocked)).toStrictEqual(loadConfig(options()));
  });

  it('is off with THE_LOOP_CONFIG_CACHE=0, and when running from the TypeScript sources', () => {
    expect(configCacheFor({ THE_LOOP_CONFIG_CACHE: '0', HOME: dir })).toBeNull();
    // These tests run src/*.ts: the cache is only on for the built code.
    expect(configCacheFor({ HOME: dir })).toBeNull();
  });

  it('what a command opens on a hit loads neither the YAML parser nor zod (static imports)', async () => {
    const result = await build({
      entryPoints: ['src/main-base.ts'],
      bundle: true,
      platform: 'node',
      format: 'esm',
      splitting: true,
      outdir: join(dir, 'out'),
      packages: 'external',
      metafile: true,
      write: false,
      logLevel: 'silent',
    });
    const inputs = result.metafile.inputs;
    const seen = new Set<string>();
    const queue = ['src/main-base.ts'];
    const packages = new Set<string>();
    while (queue.length > 0) {
      const file = queue.shift() ?? '';
      for (const imported of inputs[file]?.imports ?? []) {
        if (imported.kind !== 'import-statement') continue;
        if (imported.external) packages.add(imported.path);
        else if (!seen.has(imported.path)) {
          seen.add(imported.path);
          queue.push(imported.path);
        }
      }
    }
    expect(seen.size).toBeGreaterThan(20);
    expect([...packages].filter((p) => p === 'zod' || p === 'yaml')).toStrictEqual([]);
  });
});
