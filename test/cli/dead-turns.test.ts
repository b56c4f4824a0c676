import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb } from '../../src/store/db.js';
import { SqliteInbox } from '../../src/store/sqlite/inbox.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { makeProject, runCli } from '../helpers/cli.js';

/**
 * The commands that show turns without building the app (`sessions list`, `events list`/`show`)
 * still do what the app did first: a running turn whose owner process died is lost, not running.
 */
describe('turns of dead processes, as the reading commands show them', () => {
  const cleanups: Array<() => void> = [];
  afterEach(() => {
    for (const c of cleanups.splice(0)) c();
  });

  it('sessions list, events list and events show call a dead owner’s turn lost', async () => {
    const project = makeProject({ dataDir: 'data' });
    cleanups.push(project.cleanup);
    const db = openDb(join(project.dir, '.the-loop/data/the-loop.db'));
    const sessions = new SqliteSessionStore(db, { scrub: (t) => t });
    const inbox = new SqliteInbox(db);
    await inbox.acceptMany([
      {
        id: 'd-dead',
        source: 'github',
        event: 'issue_comment',
        action: 'created',
        body: '{}',
        routed: { action: 'ignore', workItem: 'github:octo/widgets#1', reason: 'seeded' },
      },
    ]);
    const session = await sessions.create({
      workItem: 'github:octo/widgets#1',
      slug: 'github-octo-widgets-1-dead',
      engine: 'claude',
      runner: 'process',
      engineSessionId: null,
      cwd: project.dir,
      credentialKind: null,
      credentialEnv: null,
    });
    const turn = await sessions.beginTurn(session.id, {
      promptDigest: 'sha256:x',
      promptBytes: 1,
      meter: 'transcript',
      deliveryId: 'd-dead',
    });
    // Its owner: a process that has exited.
    const gone = spawnSync(process.execPath, ['-e', '0']).pid;
    db.prepare('UPDATE turns SET owner_pid = ?, pid = NULL WHERE id = ?').run(gone, turn.id);
    db.close();

    const show = await runCli(['events', 'show', 'd-dead'], { cwd: project.dir });
    expect(show.code).toBe(0);
    expect(show.stdout).toMatch(/turn 1, failed \(lost\)/);
    const list = await runCli(['sessions', 'list', '--json'], { cwd: project.dir });
    expect(list.code).toBe(0);
    expect(JSON.parse(list.stdout)[0]).toMatchObject({ workItem: 'github:octo/widgets#1', running: false });
    const events = await runCli(['events', 'list', '--json'], { cwd: project.dir });
    expect(events.code).toBe(0);
    expect(JSON.parse(events.stdout)[0]).toMatchObject({ id: 'd-dead' });
  });
});
