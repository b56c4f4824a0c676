import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeProject, runCli } from '../helpers/cli.js';

describe('the-loop acts: arguments and an empty audit', () => {
  let project: ReturnType<typeof makeProject>;
  beforeAll(() => {
    project = makeProject({ dataDir: 'data' });
  });
  afterAll(() => project?.cleanup());
  const cli = (args: string[]) =>
    runCli(args, { cwd: project.dir, env: { THE_LOOP_CONFIG: project.configPath } });

  it('an empty audit says so, in text and JSON', async () => {
    const text = await cli(['acts']);
    expect([text.code, text.stdout]).toEqual([
      0,
      '0 acts · 0 breaches · 0 blocked before they took effect\n',
    ]);
    const json = await cli(['acts', '--json', '--breaches', '--kind', 'git-push', '--since', '7d']);
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual([]);
  });

  it('refuses an unknown kind, a bad --since, a bad work item and a bad limit, with a usage error', async () => {
    const kind = await cli(['acts', '--kind', 'git-yeet']);
    expect(kind.code).toBe(2);
    expect(kind.stderr).toMatch(/--kind takes one of git-push, .*not "git-yeet"/);
    const since = await cli(['acts', '--since', 'the dawn of time']);
    expect(since.code).toBe(2);
    expect(since.stderr).toMatch(/--since/);
    const wi = await cli(['acts', '--work-item', 'not a work item']);
    expect(wi.code).toBe(2);
    const limit = await cli(['acts', '--limit', '0']);
    expect(limit.code).toBe(2);
    expect(limit.stderr).toMatch(/--limit takes a whole number from 1/);
  });
});
