/**
 * `sessions takeover|handback` and what `sessions list` shows of a take over, through the CLI's own
 * entry (main, in this process) over a real registry file: a session written as the turn service
 * writes it, then the commands as a person types them.
 */
import { writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Io } from '../../src/cli/io.js';
import { main } from '../../src/cli/main.js';
import { openDb } from '../../src/store/db.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { fakeEngineConfig, makeProject } from '../helpers/cli.js';

const WI = 'github:octo/widgets#21';

describe('the-loop sessions takeover / handback (real registry)', () => {
  let project: ReturnType<typeof makeProject>;
  let dataDir: string;
  beforeAll(async () => {
    project = makeProject();
    writeFileSync(project.configPath, JSON.stringify(fakeEngineConfig(join(project.dir, 'engine-state'))));
    dataDir = join(project.dir, 'data');
    const db = openDb(join(dataDir, 'the-loop.db'));
    await new SqliteSessionStore(db, { scrub: (t) => t }).create({
      workItem: WI,
      slug: 'github-octo-widgets-21',
      engine: 'fake',
      runner: 'tmux',
      engineSessionId: null,
      cwd: project.dir,
      credentialKind: null,
      credentialEnv: null,
      tmuxTarget: 'loop-github-octo-widgets-21',
    });
    db.close();
  });
  afterAll(() => project.cleanup());

  async function cli(args: string[], env: Record<string, string> = {}) {
    let stdout = '';
    let stderr = '';
    const io: Io = {
      out: (t) => {
        stdout += t;
      },
      err: (t) => {
        stderr += t;
      },
      cwd: project.dir,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        XDG_STATE_HOME: process.env.XDG_STATE_HOME,
        USER: 'carol',
        ...env,
      },
    };
    const code = await main(['node', 'the-loop', '--data-dir', dataDir, ...args], io);
    return { code, stdout, stderr };
  }

  it('takes a session over as --as, shows it in `sessions list` (text and --json), refuses someone else', async () => {
    const taken = await cli(['sessions', 'takeover', WI, '--as', 'alice']);
    expect(taken.stderr).toBe('');
    expect(taken.code).toBe(0);
    expect(taken.stdout).toMatch(
      /github:octo\/widgets#21: taken over by alice since \S+; its deliveries wait\./,
    );
    expect(taken.stdout).toContain(`the-loop sessions attach ${WI}`);
    expect(taken.stdout).toContain(`the-loop sessions handback ${WI}`);

    const list = await cli(['sessions', 'list']);
    expect(list.stdout).toMatch(/taken over by alice/);
    const rows = JSON.parse((await cli(['sessions', 'list', '--json'])).stdout) as Array<
      Record<string, unknown>
    >;
    expect(rows[0]).toMatchObject({ workItem: WI, takeover: { by: 'alice', principal: null } });
    const show = await cli(['sessions', 'show', WI]);
    expect(show.stdout).toMatch(/taken over by alice since \S+: hand back to go on/);

    const again = await cli(['sessions', 'takeover', WI, '--as', 'alice', '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ takenOver: true, already: true });
    const other = await cli(['sessions', 'takeover', WI, '--as', 'bob']);
    expect(other.code).toBe(2);
    expect(other.stderr).toMatch(/taken over by alice since/);
  });

  it('hands it back: the list shows it as before, the drive is in the ledger; a second hand back says so', async () => {
    const back = await cli(['sessions', 'handback', WI]);
    expect(back.code).toBe(0);
    expect(back.stdout).toMatch(/handed back \(taken over by alice since \S+\)\. Held deliveries run next\./);
    expect((await cli(['sessions', 'list'])).stdout).not.toMatch(/taken over/);
    const db = openDb(join(dataDir, 'the-loop.db'));
    try {
      const report = await new SqliteLedgerStore(db).report({
        since: new Date(Date.now() - 3_600_000),
        until: new Date(Date.now() + 3_600_000),
        by: 'day',
      });
      expect(report.notIncluded.unmetered).toEqual([
        expect.objectContaining({
          engine: 'fake',
          runner: 'tmux',
          reason: expect.stringMatching(/^typed by alice \(taken over .+ → .+\)$/),
        }),
      ]);
    } finally {
      db.close();
    }
    const twice = await cli(['sessions', 'handback', WI, '--json']);
    expect(JSON.parse(twice.stdout)).toMatchObject({ handedBack: false, released: null });
  });

  it('takes over as $USER@host by default', async () => {
    const taken = JSON.parse((await cli(['sessions', 'takeover', WI, '--json'])).stdout);
    expect(taken.session.takeover).toMatchObject({ by: `carol@${hostname()}`, principal: null });
    await cli(['sessions', 'handback', WI]);
  });
});
