/**
 * The keys socket is a per-session capability: once its session is no longer active in the registry
 * (closed, ended, lost), the socket of a turn that runs on refuses every request at the wire — not
 * only the CLI, which checks first. Real SQLite registry, real engine process on a real PTY.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LoopError } from '../../../src/core/errors.js';
import type { TurnEvent } from '../../../src/core/events.js';
import { parseWorkItem, workItemSlug } from '../../../src/core/work-item.js';
import { presetSchema } from '../../../src/engines/preset.js';
import { runtimeDirOf } from '../../../src/os/runtime-dir.js';
import { exchangeKeysLine, keysSocketPath } from '../../../src/runners/process/keys-socket.js';
import { ProcessRunner } from '../../../src/runners/process/process-runner.js';
import { openDb } from '../../../src/store/db.js';
import { SqliteSessionStore } from '../../../src/store/sqlite/sessions.js';
import { FAKE_ENGINE } from '../../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'tl-keys-life-'));
const engineState = join(dir, 'engine');
mkdirSync(engineState);
const db = openDb(join(dir, 'the-loop.db'));
afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const onPty = presetSchema.parse({
  binary: FAKE_ENGINE,
  protocol: 'claude-stream-json',
  sessionId: 'assign',
  pty: true,
  headless: {
    args: ['-p'],
    start: ['--session-id', '{sessionId}'],
    resume: ['--resume', '{sessionId}'],
    promptPrefix: ['--'],
  },
});

describe('keys socket: refused once the session has ended', () => {
  const store = new SqliteSessionStore(db, { scrub: (t) => t });
  const env = { TMPDIR: dir };
  // As main.ts wires it: the status comes from the registry, asked per request.
  const runner = new ProcessRunner({
    dataDir: dir,
    env,
    sessionStatus: async (id) => (await store.get(id))?.status,
  });
  const client = new ProcessRunner({ dataDir: dir, env });

  it('takes keys while the session is active, and refuses them at the wire after it is closed', async () => {
    const workItem = 'github:octo/widgets#7';
    const slug = workItemSlug(parseWorkItem(workItem));
    const session = await store.create({
      workItem,
      slug,
      engine: 'fake',
      runner: 'process',
      engineSessionId: null,
      cwd: dir,
      credentialKind: null,
      credentialEnv: null,
    });
    const path = keysSocketPath(runtimeDirOf(env, dir), slug);
    const events: TurnEvent[] = [];
    let markReady: () => void = () => {};
    const ready = new Promise<void>((resolve) => {
      markReady = resolve;
    });
    const stop = new AbortController();
    const turn = runner.runTurn({
      preset: onPty,
      session: { id: session.id, slug, tmuxTarget: null },
      engineSessionId: 'k-life',
      first: true,
      prompt: 'mode:wait-keys',
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', FAKE_ENGINE_STATE: engineState },
      backstopMs: 30_000,
      killGraceMs: 300,
      maxLineBytes: 1024 * 1024,
      signal: stop.signal,
      onEvent: (e) => {
        events.push(e);
        if (e.type === 'text' && e.text === 'ready') markReady();
      },
    });
    await ready;
    const ask = async (keys: string[]) => JSON.parse(await exchangeKeysLine(path, JSON.stringify({ keys })));

    expect(await ask(['a'])).toEqual({ ok: true, sent: [{ key: 'a', literal: true }] });

    await store.close(session.id, 'closed by hand');
    // A client that skips the CLI's own check is refused by the socket itself.
    expect(await ask(['b', 'Escape'])).toEqual({
      ok: false,
      error: 'the session is closed: no keys reach it',
    });
    const viaClient = await client
      .sendKeys({ workItem, slug }, onPty, ['c', 'Escape'])
      .catch((e: unknown) => e);
    expect(viaClient).toBeInstanceOf(LoopError);
    expect((viaClient as LoopError).message).toBe(
      "the engine's terminal took no keys: the session is closed: no keys reach it",
    );
    // A new session of the same work item (same slug) does not revive the old turn's socket.
    await store.create({
      workItem,
      slug,
      engine: 'fake',
      runner: 'process',
      engineSessionId: null,
      cwd: dir,
      credentialKind: null,
      credentialEnv: null,
    });
    expect(await ask(['d'])).toEqual({ ok: false, error: 'the session is closed: no keys reach it' });

    stop.abort();
    const outcome = await turn;
    expect(outcome.endReason).toBe('cancel');
    // Only the key pressed while the session was active reached the engine.
    const got = events.flatMap((e) => (e.type === 'text' && e.text.startsWith('got:') ? [e.text] : []));
    expect(got).toEqual([`got:${Buffer.from('a').toString('hex')}`]);
  });
});
