/**
 * The accountability assertion: an engine that declares a structured meter (stream-json) but whose
 * results never carry usage is flagged `unaccounted` after its first completed turn, visible in the
 * session views; further deliveries are held until a person acknowledges it (`sessions resume`).
 * The same engine reporting usage is not flagged.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { fakeEngineConfig, makeProject, runCli } from '../helpers/cli.js';

describe('accountability: a declared meter that never reports holds the session', () => {
  let project: ReturnType<typeof makeProject>;
  let env: Record<string, string>;
  beforeAll(() => {
    project = makeProject();
    const state = join(project.dir, 'state');
    mkdirSync(state);
    const config = fakeEngineConfig(state);
    const engines = config.engines as Record<string, Record<string, unknown>>;
    // The same engine twice: `silent` declares the stream-json meter and never reports usage.
    engines.silent = { ...engines.fake, env: { FAKE_ENGINE_STATE: state, FAKE_ENGINE_NO_USAGE: '1' } };
    writeFileSync(project.configPath, stringify({ ...config, dataDir: 'data' }));
    env = { THE_LOOP_CONFIG: project.configPath };
  });
  afterAll(() => project?.cleanup());
  const cli = (args: string[]) => runCli(args, { cwd: project.dir, env });

  it('flags the silent engine unaccounted, holds its next delivery, and releases it when acknowledged', async () => {
    const first = await cli(['run', 'github:acme/quiet#1', '--engine', 'silent', '--', 'hello']);
    expect(first.code, first.stderr).toBe(0);
    const show = JSON.parse((await cli(['sessions', 'show', 'github:acme/quiet#1', '--json'])).stdout) as {
      session: { hold: { kind: string; reason: string } | null };
    };
    expect(show.session.hold).toMatchObject({ kind: 'unaccounted' });
    expect(show.session.hold?.reason).toMatch(/no usage record \(its meter is stream-json\)/);
    expect((await cli(['sessions', 'list'])).stdout).toMatch(
      /github:acme\/quiet#1\s+silent\s+process\s+-\s+unaccounted/,
    );
    expect((await cli(['sessions', 'show', 'github:acme/quiet#1'])).stdout).toMatch(
      /held, unaccounted: the first turn/,
    );

    const held = await cli(['run', 'github:acme/quiet#1', '--', 'again']);
    expect(held.code).toBe(1);
    expect(held.stdout).toMatch(/held: the first turn of this silent session produced no usage record/);

    const resumed = await cli(['sessions', 'resume', 'github:acme/quiet#1']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toMatch(/acknowledged/);
    const after = await cli(['run', 'github:acme/quiet#1', '--', 'and now']);
    expect(after.code, after.stdout).toBe(0);
    // Acknowledged once: later turns are not judged again.
    const again = JSON.parse((await cli(['sessions', 'show', 'github:acme/quiet#1', '--json'])).stdout) as {
      session: { hold: unknown };
      turns: unknown[];
    };
    expect(again.session.hold).toBeNull();
    expect(again.turns).toHaveLength(3);
  }, 60_000);

  it('does not flag an engine that reports its usage', async () => {
    const res = await cli(['run', 'github:acme/loud#1', '--', 'hello']);
    expect(res.code, res.stderr).toBe(0);
    const show = JSON.parse((await cli(['sessions', 'show', 'github:acme/loud#1', '--json'])).stdout) as {
      session: { hold: unknown };
    };
    expect(show.session.hold).toBeNull();
  }, 60_000);
});
