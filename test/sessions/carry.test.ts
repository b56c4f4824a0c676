/**
 * A process-runner session's conversation carried between hosts (sessions/carry.ts, issue 17), on
 * the real PostgreSQL store and real files: host a saves Claude Code's transcript after a turn
 * (secrets masked), host b restores it under its own config directory; a copy that is the stored
 * one, or this host's newer one, is kept; nothing is read or written through a symlink; a tampered
 * name is refused; an oversized file is not carried; a save after the lease moved on writes nothing.
 */

import { execFileSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { SessionRecord } from '../../src/core/ports/sessions.js';
import { type EnginePreset, presetSchema } from '../../src/engines/preset.js';
import { BUILTIN_PRESETS } from '../../src/engines/presets.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import { SessionCarry } from '../../src/sessions/carry.js';
import { PgSessionFiles } from '../../src/store/postgres/session-files.js';
import {
  type Host,
  LEASE_SECONDS,
  newSession,
  sleep,
  turnEnd,
  turnInput,
  twoHosts,
} from '../store/postgres/fence-setup.js';

const WI = 'github:octo/widgets#9';
const ENGINE_ID = '0d6f5a8e-2b1c-4e3d-9f7a-6b5c4d3e2f1a';
const DIR = '-work-widgets';
const NAME = `projects/${DIR}/${ENGINE_ID}.jsonl`;
const CANARY = 'sk-ant-canary-Qx7Lw2Zp9Rt4';
const claude: EnginePreset = presetSchema.parse(BUILTIN_PRESETS.claude);

let a: Host;
let b: Host;
let close: () => Promise<void>;
let root: string;
let session: SessionRecord;
let turnId: number;

const scrub = (t: string) => t.replaceAll(CANARY, '***');
const carrier = (h: Host, maxBytes?: number) =>
  new SessionCarry({
    files: new PgSessionFiles(h.db, h.id),
    host: h.id,
    scrub,
    ...(maxBytes ? { maxBytes } : {}),
  });
const homeOf = (h: Host) => join(root, h.id, '.claude');
function input(h: Host) {
  const sink = memorySink();
  const log = createLogger({ level: 'debug', sinks: [sink] });
  return {
    session,
    preset: claude,
    env: { CLAUDE_CONFIG_DIR: homeOf(h), HOME: join(root, h.id) },
    log,
    sink,
  };
}
const warnings = (sink: { lines: string[] }) =>
  sink.lines.map((l) => JSON.parse(l) as { level: string; msg: string }).filter((l) => l.level === 'warn');
const writeTranscript = (h: Host, text: string) => {
  mkdirSync(join(homeOf(h), 'projects', DIR), { recursive: true });
  writeFileSync(join(homeOf(h), NAME), text);
};

beforeEach(async () => {
  ({ a, b, close } = await twoHosts());
  root = mkdtempSync(join(tmpdir(), 'the-loop-carry-'));
  await a.acquire(WI);
  session = await a.sessions.create(newSession(WI, { engineSessionId: ENGINE_ID }));
  const turn = await a.sessions.beginTurn(session.id, turnInput());
  await a.sessions.finishTurn(turn.id, turnEnd());
  turnId = turn.id;
});
afterEach(async () => {
  await close();
  rmSync(root, { recursive: true, force: true });
});

describe('carrying a session between hosts', () => {
  it('saves after a turn with secrets masked, and restores it on another host at the same path', async () => {
    const text = `{"type":"user","message":"remember ${CANARY}"}\n{"type":"assistant"}\n`;
    writeTranscript(a, text);
    await carrier(a).save(input(a), turnId);
    const stored = await a.db.row<{ body: Buffer }>('SELECT body FROM session_files');
    expect(stored?.body.toString()).not.toContain(CANARY);

    const onB = input(b);
    await carrier(b).restore(onB);
    const restored = join(homeOf(b), NAME);
    expect(readFileSync(restored, 'utf8')).toBe(scrub(text));
    expect(statSync(restored).mode & 0o777).toBe(0o600);
    expect(statSync(join(homeOf(b), 'projects', DIR)).mode & 0o777).toBe(0o700);
    expect(onB.sink.lines.join('')).toMatch(/restored the session's conversation saved by another host/);
    expect(onB.sink.lines.join('')).not.toContain(CANARY);

    // Restored again: the copy is the stored one, nothing is written.
    const before = statSync(restored).mtimeMs;
    await sleep(20);
    await carrier(b).restore(input(b));
    expect(statSync(restored).mtimeMs).toBe(before);
  });

  it("keeps this host's own newer copy, and replaces one another host's later save supersedes", async () => {
    writeTranscript(a, 'turn one\n');
    await carrier(a).save(input(a), turnId);
    // a's save of a later turn failed: its file is newer than the store's, and stays.
    writeTranscript(a, 'turn one\nturn two\n');
    await carrier(a).restore(input(a));
    expect(readFileSync(join(homeOf(a), NAME), 'utf8')).toBe('turn one\nturn two\n');
    // A stale copy on b (b ran the session long ago) is replaced by a's save.
    writeTranscript(b, 'ancient\n');
    const onB = input(b);
    await carrier(b).restore(onB);
    expect(readFileSync(join(homeOf(b), NAME), 'utf8')).toBe('turn one\n');
    expect(warnings(onB.sink)).toEqual([]);
    // A turn after the save ended with no save of its own (its host died first): said.
    rmSync(join(homeOf(b), NAME));
    const stale = input(b);
    await carrier(b).restore({ ...stale, lastTurnId: turnId + 1 });
    expect(warnings(stale.sink).map((w) => w.msg)).toEqual([
      "the stored conversation predates the session's last turn (its host did not save it): the engine resumes without what that turn said",
    ]);
  });

  it('never reads the transcript through a symlink (an engine cannot smuggle a file into the store)', async () => {
    const secret = join(root, 'operator-key');
    writeFileSync(secret, `PRIVATE ${CANARY}-ssh\n`);
    mkdirSync(join(homeOf(a), 'projects', DIR), { recursive: true });
    symlinkSync(secret, join(homeOf(a), NAME));
    await carrier(a).save(input(a), turnId);
    // Nor when the project directory is a symlink to a directory holding a file of that name.
    rmSync(join(homeOf(a), 'projects', DIR), { recursive: true });
    const elsewhere = join(root, 'elsewhere');
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, `${ENGINE_ID}.jsonl`), 'smuggled\n');
    symlinkSync(elsewhere, join(homeOf(a), 'projects', DIR));
    await carrier(a).save(input(a), turnId);
    expect(await a.db.rows('SELECT name FROM session_files')).toEqual([]);
  });

  it('a FIFO at the transcript path neither blocks the daemon nor is carried, and is replaced on restore', async () => {
    mkdirSync(join(homeOf(a), 'projects', DIR), { recursive: true });
    execFileSync('mkfifo', [join(homeOf(a), NAME)]);
    await carrier(a).save(input(a), turnId);
    expect(await a.db.rows('SELECT name FROM session_files')).toEqual([]);
    // b saved a real one; a FIFO left where a restores it is read without waiting, then replaced.
    rmSync(join(homeOf(a), NAME));
    writeTranscript(a, 'real\n');
    await carrier(a).save(input(a), turnId);
    mkdirSync(join(homeOf(b), 'projects', DIR), { recursive: true });
    execFileSync('mkfifo', [join(homeOf(b), NAME)]);
    await carrier(b).restore(input(b));
    expect(readFileSync(join(homeOf(b), NAME), 'utf8')).toBe('real\n');
  });

  it('a directory the engine left at the transcript path fails the restore with a hint, not a bare EISDIR', async () => {
    writeTranscript(a, 'hello\n');
    await carrier(a).save(input(a), turnId);
    mkdirSync(join(homeOf(b), NAME), { recursive: true });
    const error = await carrier(b)
      .restore(input(b))
      .then(
        () => undefined,
        (e: unknown) => e as { message: string; hint?: string },
      );
    expect(error?.message).toMatch(/cannot restore the session's conversation projects\/.*\.jsonl/);
    expect(error?.hint).toMatch(/sessions close/);
  });

  it('saves nothing when the stored copy is the same', async () => {
    writeTranscript(a, 'same\n');
    await carrier(a).save(input(a), turnId);
    const first = await a.db.row<{ saved_at: Date }>('SELECT saved_at FROM session_files');
    await sleep(20);
    await carrier(a).save(input(a), turnId);
    expect((await a.db.row<{ saved_at: Date }>('SELECT saved_at FROM session_files'))?.saved_at).toEqual(
      first?.saved_at,
    );
  });

  it('refuses a turn whose started conversation is neither here nor in the store (--resume would fail every time)', async () => {
    await a.sessions.markEngineSessionStarted(session.id, ENGINE_ID);
    session = (await a.sessions.get(session.id)) ?? session;
    await expect(carrier(b).restore(input(b))).rejects.toThrow(
      /conversation \(engine session [0-9a-f-]+\) is neither on this host nor in the store/,
    );
    // Here, the local copy is enough (a session run before the store was shared).
    writeTranscript(a, 'local only\n');
    await expect(carrier(a).restore(input(a))).resolves.toBeUndefined();
  });

  it('never writes through a symlink, and refuses a stored name that is not the engine’s', async () => {
    writeTranscript(a, 'hello\n');
    await carrier(a).save(input(a), turnId);
    // b's projects directory is a symlink to somewhere else: the restore refuses it.
    const outside = join(root, 'outside');
    mkdirSync(outside);
    mkdirSync(homeOf(b), { recursive: true });
    symlinkSync(outside, join(homeOf(b), 'projects'));
    await expect(carrier(b).restore(input(b))).rejects.toThrow(/cannot restore .* is not a directory/);
    expect(existsSync(join(outside, DIR))).toBe(false);

    // A tampered row names a path outside the config directory: refused, said, nothing written.
    rmSync(join(homeOf(b), 'projects'));
    await a.db.run(`UPDATE session_files SET name = $1`, [`projects/../../escaped/${ENGINE_ID}.jsonl`]);
    const onB = input(b);
    await carrier(b).restore(onB);
    expect(existsSync(join(root, 'b', 'escaped'))).toBe(false);
    expect(existsSync(join(root, 'escaped'))).toBe(false);
    expect(warnings(onB.sink).map((w) => w.msg)).toContain(
      'refused a stored session file whose name is not the engine’s',
    );
  });

  it('does not carry a file over the size limit, and says so', async () => {
    writeTranscript(a, 'x'.repeat(2048));
    const onA = input(a);
    await carrier(a, 1024).save(onA, turnId);
    expect(await a.db.rows('SELECT name FROM session_files')).toEqual([]);
    expect(warnings(onA.sink)[0]?.msg).toMatch(/over 1024 bytes: not carried/);
  });

  it('a save after the lease moved on writes nothing, and says so', async () => {
    writeTranscript(a, 'late\n');
    await sleep(LEASE_SECONDS * 1000 + 150);
    const onA = input(a);
    await carrier(a).save(onA, turnId);
    expect(await a.db.rows('SELECT name FROM session_files')).toEqual([]);
    expect(warnings(onA.sink)[0]?.msg).toMatch(/not saved: this host no longer holds the work item/);
  });
});
