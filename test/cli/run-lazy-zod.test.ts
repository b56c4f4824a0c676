import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fakeEngineConfig, makeProject, ROOT, runCli } from '../helpers/cli.js';

/**
 * issue 16 (bench:turn): everything `the-loop run` does before its engine starts delays the engine.
 * A turn whose lines pass the protocol's quick checks never loads zod (nor, on a cached config, the
 * YAML parser): the CLI bundle alone is compiled.
 */
describe('the-loop run in the CLI bundle', () => {
  let project: ReturnType<typeof makeProject>;
  let env: Record<string, string | undefined>;
  let state: string;

  beforeAll(() => {
    state = mkdtempSync(join(tmpdir(), 'the-loop-fake-state-'));
    project = makeProject(fakeEngineConfig(state));
    env = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      LANG: 'C.UTF-8',
      XDG_STATE_HOME: join(project.dir, 'state'),
    };
  });
  afterAll(() => {
    project.cleanup();
    rmSync(state, { recursive: true, force: true });
  });

  it('runs a turn without loading zod or the YAML parser', async () => {
    // The first command validates the config (zod, YAML) and keeps it in the config cache.
    const first = await runCli(['run', 'github:o/r#1', 'hello'], { cwd: project.dir, env });
    expect(first.code, first.stderr).toBe(0);
    const probe = `const vm = require('node:vm');
const compiled = [];
vm.Script = class extends vm.Script {
  constructor(source, options) {
    super(source, options);
    compiled.push(options.filename.split('/').pop());
  }
};
const { loadCli } = require(${JSON.stringify(join(ROOT, 'bin/cli-load.js'))});
const cli = loadCli('run');
cli.exports.main(['node', 'the-loop', 'run', 'github:o/r#2', 'hello']).then((code) => {
  process.stderr.write(JSON.stringify({ code, compiled }));
  process.exit(0);
});`;
    const run = spawnSync(process.execPath, ['-e', probe], {
      encoding: 'utf8',
      cwd: project.dir,
      env,
      timeout: 60_000,
    });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/turn 1 succeeded/);
    expect(JSON.parse(run.stderr.slice(run.stderr.lastIndexOf('{"code"')))).toEqual({
      code: 0,
      compiled: ['cli.cjs'],
    });
  });
});
