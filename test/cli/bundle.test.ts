import { spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain CommonJS module of bin/ (no types)
import { buildIdOf, cachedDataOf, commandGroup, header } from '../../bin/cli-load.js';
import { LAZY_HELPER, lazyBuiltins } from '../../scripts/build-cli.js';
import { commandOf } from '../../src/cli/main.js';
import { ROOT } from '../helpers/cli.js';

const argv = (...args: string[]) => ['node', 'the-loop', ...args];

describe('the CLI bundle (dist/cli.cjs) and its code caches', () => {
  it('picks the cache of the command named, after global options and their values', () => {
    expect(commandGroup(argv('usage'))).toBe('usage');
    expect(commandGroup(argv('-c', 'usage', 'acts'))).toBe('acts');
    expect(commandGroup(argv('--config', 'x.yaml', '--data-dir', 'sessions', 'events', 'list'))).toBe(
      'events',
    );
    expect(commandGroup(argv('--config=x.yaml', 'sessions', 'list'))).toBe('sessions');
    expect(commandGroup(argv('serve', '--once'))).toBe('serve');
    expect(commandGroup(argv('mcp', 'audit'))).toBe('mcp');
    expect(commandGroup(argv('run', 'github:o/r#1', 'usage'))).toBe('run');
    expect(commandGroup(argv('--help'))).toBe('other');
    expect(commandGroup(argv())).toBe('other');
    expect(commandGroup(argv('-c'))).toBe('other');
  });

  it('defines only the group of the command named; all of them for help, a typo or none', () => {
    expect(commandOf(argv('usage', 'scan'))).toBe('usage');
    expect(commandOf(argv('-c', 'run', 'acts'))).toBe('acts');
    expect(commandOf(argv('--data-dir', 'd', 'mcp', 'audit'))).toBe('mcp');
    expect(commandOf(argv('help', 'usage'))).toBeUndefined();
    expect(commandOf(argv('usag'))).toBeUndefined();
    expect(commandOf(argv('--', 'usage'))).toBeUndefined();
    expect(commandOf(argv('--version'))).toBeUndefined();
    // Help before the command prints the program's help: every command listed.
    expect(commandOf(argv('--help', 'usage'))).toBeUndefined();
    expect(commandOf(argv('-h', 'sessions', 'list'))).toBeUndefined();
    expect(commandOf(argv('usage', '--help'))).toBe('usage');
  });

  it('uses a cache only when its header names this bundle (build id, size and mtime)', () => {
    const stat = { size: 1234, mtimeMs: 1_700_000_000_123.5 };
    const id = 'c91d3ebd193a87247e2c7057f7114d98';
    expect(buildIdOf(`/*the-loop-build:${id}*/\n'use strict';`)).toBe(id);
    expect(buildIdOf("'use strict';")).toBe('');
    const data = Buffer.from([1, 2, 3]);
    const file = Buffer.concat([Buffer.from(header(stat, id)), data]);
    expect(cachedDataOf(stat, id, file)).toEqual(data);
    // Rebuilt with the same size and mtime: another id.
    expect(cachedDataOf(stat, 'ffffffffffffffffffffffffffffffff', file)).toBeUndefined();
    expect(cachedDataOf(stat, '', file)).toBeUndefined();
    expect(cachedDataOf({ ...stat, mtimeMs: stat.mtimeMs + 1 }, id, file)).toBeUndefined();
    expect(cachedDataOf({ ...stat, size: 1235 }, id, file)).toBeUndefined();
    expect(cachedDataOf(stat, id, Buffer.from(header(stat, id)))).toBeUndefined();
    expect(cachedDataOf(stat, id, Buffer.from('garbage'))).toBeUndefined();
  });

  it('makes heavy built-ins lazy and external import()s requires, nothing else', () => {
    const code =
      'a=require("node:child_process");b=require("crypto");c=require("node:fs");d=import("node-pty");e=import("./x.js");f=import("graphql/language/index.js")';
    expect(lazyBuiltins(code)).toBe(
      'a=__theLoopLazy("node:child_process");b=__theLoopLazy("node:crypto");c=require("node:fs");d=Promise.resolve().then(() => require("node-pty"));e=import("./x.js");f=Promise.resolve().then(() => require("graphql/language/index.js"))',
    );
  });

  it('loads a lazy built-in on its first use, whole when its keys are read', () => {
    const loads: string[] = [];
    const real = createRequire(import.meta.url);
    const fakeRequire = (id: string) => {
      loads.push(id);
      return real(id);
    };
    const lazy = new Function('require', `${LAZY_HELPER}\nreturn __theLoopLazy;`)(fakeRequire) as (
      id: string,
    ) => Record<string, unknown>;
    const os = lazy('node:os');
    expect(loads).toEqual([]);
    expect(typeof os.hostname).toBe('function');
    expect(loads).toEqual(['node:os']);
    expect('platform' in os).toBe(true);
    expect(Object.keys(os)).toContain('tmpdir');
    expect(loads).toEqual(['node:os']);
    const path = lazy('node:path');
    expect({ ...path }.join).toBe(real('node:path').join);
    // A property defined on it lands on the module (no Proxy invariant error on the next read).
    const events = lazy('node:events');
    Object.defineProperty(events, '__theLoopTest', { value: 1, configurable: true });
    expect(events.__theLoopTest).toBe(1);
    delete (real('node:events') as Record<string, unknown>).__theLoopTest;
  });

  it('the built bundle answers with the package version and its caches are accepted by this Node', () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const version = spawnSync(process.execPath, [join(ROOT, 'bin/the-loop.js'), '--version'], {
      encoding: 'utf8',
    });
    expect(version.stdout.trim()).toBe(pkg.version);
    expect(version.stderr).toBe('');
    // The escape hatch: tsc's dist/, unbundled, answers the same.
    const unbundled = spawnSync(process.execPath, [join(ROOT, 'bin/the-loop.js'), '--version'], {
      encoding: 'utf8',
      env: { ...process.env, THE_LOOP_UNBUNDLED: '1' },
    });
    expect(unbundled.stdout.trim()).toBe(pkg.version);
    const probe = `import { loadCli } from ${JSON.stringify(join(ROOT, 'bin/cli-load.js'))};
const { script } = loadCli('usage');
console.log(JSON.stringify({ rejected: script.cachedDataRejected }));`;
    const out = spawnSync(process.execPath, ['--input-type=module', '-e', probe], { encoding: 'utf8' });
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout)).toEqual({ rejected: false });
    expect(statSync(join(ROOT, 'dist/cli-cache/usage.bin')).size).toBeGreaterThan(0);
  });

  it('zod and the YAML parser are bundled apart, loaded once when required, with accepted caches', () => {
    const bundle = readFileSync(join(ROOT, 'dist/cli.cjs'), 'latin1');
    expect(bundle).toContain('require("zod")');
    expect(bundle).toContain('require("yaml")');
    // zod's own text (its error messages) is not in the CLI bundle.
    expect(bundle).not.toContain('Invalid option: expected one of');
    // Every script the loader compiles, and whether V8 took its cache.
    const probe = `const vm = require('node:vm');
const compiled = [];
vm.Script = class extends vm.Script {
  constructor(source, options) {
    super(source, options);
    compiled.push([options.filename.split('/').pop(), this.cachedDataRejected]);
  }
};
const { loadCli } = require(${JSON.stringify(join(ROOT, 'bin/cli-load.js'))});
const cli = loadCli('config');
cli.exports.main(['node', 'the-loop', 'config', 'schema']).then(() => {
  process.stderr.write(JSON.stringify(compiled));
});`;
    const run = spawnSync(process.execPath, ['-e', probe], { encoding: 'utf8', cwd: ROOT });
    expect(run.stdout).toContain('"engines"');
    // Each once, each cache taken (`config schema` reads the config: YAML, then the schemas).
    expect(JSON.parse(run.stderr)).toEqual([
      ['cli.cjs', false],
      ['cli-yaml.cjs', false],
      ['cli-zod.cjs', false],
    ]);
  });
});
