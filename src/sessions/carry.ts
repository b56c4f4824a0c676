/**
 * A process-runner session's conversation carried between the hosts sharing a store (issue 17,
 * docs/scale-out.md): after every turn the host that ran it saves the engine's session files (its
 * preset's `sessionFiles`, under its config directory) to the store, secrets masked; before a turn,
 * a host restores the files another host saved last, at the same path under its own config
 * directory, so `--resume` finds the earlier conversation. Which files, and which to restore, are
 * the pure rules of carry-rules.ts; this is their I/O.
 *
 * Files are read and written without following a symlink anywhere under the config directory (the
 * engine can write there: it must not make the daemon read the operator's files into the store, or
 * write the store's bytes outside the directory), through a temporary file renamed into place.
 */
import { createHash, randomBytes } from 'node:crypto';
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, isAbsolute, join } from 'node:path';
import { describeError, LoopError } from '../core/errors.js';
import type { SessionFileStore } from '../core/ports/session-files.js';
import type { SessionRecord } from '../core/ports/sessions.js';
import type { EnginePreset } from '../engines/preset.js';
import type { Logger } from '../log/logger.js';
import { expandPath } from '../sandbox/paths.js';
import {
  isLookupDir,
  isSessionFileName,
  planRestore,
  type SessionFileLookup,
  sessionFileLookup,
} from './carry-rules.js';

/** A session file larger than this is not carried (said in the log): a conversation of many MB. */
export const MAX_SESSION_FILE_BYTES = 64 * 1024 * 1024;

export interface CarryDeps {
  files: SessionFileStore;
  /** This host's id (`store.host`). */
  host: string;
  scrub: (text: string) => string;
  maxBytes?: number;
}

export interface CarryInput {
  session: SessionRecord;
  preset: EnginePreset;
  /** The engine's environment for the turn (its config directory variable, as the engine sees it). */
  env: Readonly<Record<string, string>>;
  log: Logger;
  /** The session's last ended turn before this one (a restored copy saved before it is stale). */
  lastTurnId?: number | undefined;
}

const sha256 = (body: Buffer) => createHash('sha256').update(body).digest('hex');
const errno = (error: unknown) => (error as NodeJS.ErrnoException | undefined)?.code;

/** The engine's config directory for this turn (absolute), if its preset names one. */
export function engineHomeOf(
  preset: EnginePreset,
  env: Readonly<Record<string, string>>,
): string | undefined {
  const home = preset.sandbox.home;
  if (!home) return undefined;
  const dir = env[home.env] || expandPath(home.default, env, { unset: 'skip' });
  return dir && isAbsolute(dir) ? dir : undefined;
}

/** A regular file's bytes, never through a symlink; `missing`, or why it is not read. */
function readRegular(path: string, max: number): Buffer | 'missing' | 'not-a-file' | 'too-big' {
  let fd: number;
  try {
    // Non-blocking: a FIFO the engine left at the path must not wait for a writer (and hang the daemon).
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    if (errno(error) === 'ENOENT') return 'missing';
    if (errno(error) === 'ELOOP') return 'not-a-file';
    throw error;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return 'not-a-file';
    if (st.size > max) return 'too-big';
    const body = Buffer.alloc(st.size);
    let at = 0;
    while (at < body.length) {
      const n = readSync(fd, body, at, body.length - at, at);
      if (n === 0) break;
      at += n;
    }
    return body.subarray(0, at);
  } finally {
    closeSync(fd);
  }
}

/** Whether `path` is a directory itself (not a symlink to one); false when missing. */
function isRealDir(path: string): boolean {
  try {
    return lstatSync(path).isDirectory();
  } catch (error) {
    if (errno(error) === 'ENOENT') return false;
    throw error;
  }
}

/**
 * The session's file under `home`, if present (a name relative to it): at most one — the one in the
 * directory named after its working directory (of a long path, the newest of those it may be).
 */
function localName(home: string, lookup: SessionFileLookup): string | undefined {
  const parent = join(home, lookup.parent);
  if (!isRealDir(parent)) return undefined;
  const dirs =
    'exact' in lookup.dir
      ? [lookup.dir.exact]
      : readdirSync(parent, { withFileTypes: true })
          .filter((d) => d.isDirectory() && isLookupDir(lookup, d.name))
          .map((d) => d.name);
  let best: { name: string; mtime: number } | undefined;
  for (const dir of dirs) {
    const name = `${lookup.parent}/${dir}/${lookup.file}`;
    try {
      if (!isRealDir(join(parent, dir))) continue;
      const st = lstatSync(join(home, name));
      if (st.isFile() && (!best || st.mtimeMs > best.mtime)) best = { name, mtime: st.mtimeMs };
    } catch {
      // Not there.
    }
  }
  return best?.name;
}

/** Write `body` at `home/name`: every directory under home real (made 0700), the file 0600, atomically. */
function writeUnder(home: string, name: string, body: Buffer): void {
  mkdirSync(home, { recursive: true, mode: 0o700 });
  let dir = home;
  for (const part of name.split('/').slice(0, -1)) {
    dir = join(dir, part);
    if (isRealDir(dir)) continue;
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      throw cannotRestore(name, `${dir} is not a directory`, error);
    }
  }
  const target = join(home, name);
  const tmp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    writeFileSync(tmp, body, { flag: 'wx', mode: 0o600 });
    renameSync(tmp, target);
  } catch (error) {
    rmSync(tmp, { force: true });
    throw cannotRestore(name, describeError(error), error);
  }
}

/** The session's conversation cannot be put where its engine reads it: the delivery fails, saying how to go on. */
const cannotRestore = (name: string, why: string, cause: unknown) =>
  new LoopError('store-failed', `cannot restore the session's conversation ${name}: ${why}`, {
    cause,
    hint: 'Something the engine left in its config directory is in the way: remove it there, or close the session (`the-loop sessions close <work item>`) so the next delivery starts a new one.',
  });

export class SessionCarry {
  constructor(private readonly deps: CarryDeps) {}

  private get max(): number {
    return this.deps.maxBytes ?? MAX_SESSION_FILE_BYTES;
  }

  /** Where this turn's engine keeps the session's files, if it declares any. */
  private where(input: CarryInput) {
    const kind = input.preset.sessionFiles;
    const home = engineHomeOf(input.preset, input.env);
    const lookup = kind && sessionFileLookup(kind, input.session.engineSessionId, input.session.cwd);
    return kind && home && lookup ? { kind, home, lookup } : undefined;
  }

  /**
   * After turn `turnId`: save each of the session's files to the store. Never throws (the turn
   * happened whatever its files): what was not saved is said in the log.
   */
  async save(input: CarryInput, turnId: number): Promise<void> {
    const where = this.where(input);
    if (!where) return;
    const { log } = input;
    const name = localName(where.home, where.lookup);
    if (!name) return;
    const tooBig = () =>
      log.warn(`the session's conversation is over ${this.max} bytes: not carried to other hosts`, {
        file: name,
      });
    try {
      const read = readRegular(join(where.home, name), this.max);
      if (read === 'too-big') return tooBig();
      if (typeof read === 'string') return;
      // Masked as text: what the engine wrote is JSON lines (a byte that is not UTF-8 becomes U+FFFD).
      const body = Buffer.from(this.deps.scrub(read.toString('utf8')), 'utf8');
      if (body.length > this.max) return tooBig();
      const digest = sha256(body);
      const stored = (await this.deps.files.list(input.session.id)).find((m) => m.name === name);
      if (stored?.digest === digest) return;
      const saved = await this.deps.files.save(input.session.id, {
        name,
        body,
        digest,
        bytes: body.length,
        turnId,
      });
      if (!saved)
        log.warn(
          "the session's conversation was not saved: this host no longer holds the work item (or a later turn's copy is stored)",
          { file: name, turnId },
        );
    } catch (error) {
      log.warn("could not save the session's conversation for other hosts", { error });
    }
  }

  /**
   * Before a turn of an existing session: restore the files another host saved last. A file the
   * store has whose name is not the engine's is refused (said); a store or disk failure throws,
   * before the turn is begun: a turn without its conversation would not resume it.
   */
  async restore(input: CarryInput): Promise<void> {
    const where = this.where(input);
    if (!where) return;
    const { kind, home } = where;
    const { session, log } = input;
    const stored = await this.deps.files.list(session.id);
    const local = new Map<string, string | null>();
    for (const meta of stored) {
      if (!isSessionFileName(kind, meta.name, session.engineSessionId, session.cwd)) continue;
      const read = readRegular(join(home, meta.name), this.max);
      local.set(meta.name, typeof read === 'string' ? null : sha256(read));
    }
    for (const step of planRestore(
      kind,
      session.engineSessionId,
      session.cwd,
      stored,
      local,
      this.deps.host,
    )) {
      const { meta } = step;
      if (step.kind === 'refused') {
        log.warn('refused a stored session file whose name is not the engine’s', { file: meta.name });
        continue;
      }
      if (step.kind !== 'restore') continue;
      const file = await this.deps.files.load(session.id, meta.name);
      if (!file || sha256(file.body) !== file.digest) {
        log.warn('a stored session file does not match its digest: not restored', { file: meta.name });
        continue;
      }
      writeUnder(home, file.name, file.body);
      if (input.lastTurnId !== undefined && file.turnId < input.lastTurnId)
        log.warn(
          "the stored conversation predates the session's last turn (its host did not save it): the engine resumes without what that turn said",
          { savedAfterTurn: file.turnId, lastTurn: input.lastTurnId, savedBy: file.hostId },
        );
      log.info(
        file.hostId === this.deps.host
          ? "restored the session's conversation from the store"
          : "restored the session's conversation saved by another host",
        {
          file: file.name,
          bytes: file.bytes,
          savedBy: file.hostId,
          afterTurn: file.turnId,
        },
      );
    }
    if (stored.length === 0 && session.engineSessionStarted && !localName(home, where.lookup)) {
      // `--resume` would fail on every delivery: said once, as the delivery's error.
      throw new LoopError(
        'session-missing',
        `${session.workItem}'s conversation (engine session ${session.engineSessionId}) is neither on this host nor in the store: its engine cannot resume it here`,
        {
          hint: `Its host died before saving it, or ran it before the store was shared. Close the session (\`the-loop sessions close ${session.workItem}\`): the next delivery starts a new one.`,
        },
      );
    }
  }
}
