import { execFileSync } from 'node:child_process';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  renameSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LedgerStore } from '../../src/core/ports/ledger.js';
import { Ledger } from '../../src/ledger/ledger.js';
import { priceTable } from '../../src/ledger/pricing.js';
import { TranscriptWatcher } from '../../src/ledger/watch.js';
import type { WatchRoot } from '../../src/ledger/watch-plan.js';
import type { Logger } from '../../src/log/logger.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { usageReport } from '../../src/store/sqlite/ledger-report.js';
import { SqliteScanCursors } from '../../src/store/sqlite/scan-files.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import {
  addTotals,
  assistantLine,
  noTotals,
  reportTotals,
  type Totals,
  transcriptBytes,
} from '../helpers/transcripts.js';

/**
 * The transcript watcher in this process, on real files, real file events and a real SQLite
 * registry: what is appended is imported once, whatever the files do meanwhile.
 */

let dir: string;
let projects: string;
let db: Db;
let watchers: TranscriptWatcher[];
let logged: Array<{ level: string; message: string; fields?: Record<string, unknown> }>;
/**
 * Imports begun (one write transaction each), how many ran at once at most, and how many were still
 * open when the event loop turned (the daemon's other writes would then wait on the lock it holds).
 */
let imports: { begun: number; running: number; most: number; spanned: number };

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-watch-'));
  projects = join(dir, 'projects');
  mkdirSync(join(projects, '-repo'), { recursive: true });
  db = openDb(join(dir, 'data', 'the-loop.db'));
  watchers = [];
  logged = [];
  imports = { begun: 0, running: 0, most: 0, spanned: 0 };
});
afterEach(async () => {
  for (const w of watchers) await w.stop();
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

function logger(): Logger {
  const at =
    (level: string) =>
    (message: string, fields?: Record<string, unknown>): void => {
      logged.push({ level, message, fields });
    };
  const l: Logger = {
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => l,
  };
  return l;
}

/** A ledger store that counts the imports (their write transactions) and how many overlap. */
function countingStore(): LedgerStore {
  const store = new SqliteLedgerStore(db);
  const counting = Object.create(store) as SqliteLedgerStore;
  counting.beginImport = async (options) => {
    imports.begun += 1;
    imports.running += 1;
    imports.most = Math.max(imports.most, imports.running);
    const writes = await store.beginImport(options);
    const end = async () => {
      imports.running -= 1;
    };
    let ended = false;
    setImmediate(() => {
      if (!ended) imports.spanned += 1;
    });
    return {
      write: (piece, price) => writes.write(piece, price),
      commit: (now) => writes.commit(now),
      finish: async () => {
        await writes.finish();
        if (!ended) await end();
        ended = true;
      },
      abort: async () => {
        await writes.abort();
        if (!ended) await end();
        ended = true;
      },
    };
  };
  return counting;
}

function startWatcher(roots: WatchRoot[] = [{ dir: projects, origin: 'config' }], recheckMs = 60_000) {
  const watcher = new TranscriptWatcher(
    {
      ledger: new Ledger(countingStore(), priceTable()),
      cursors: new SqliteScanCursors(db),
      sessions: new SqliteSessionStore(db, { scrub: (t) => t }),
      logger: logger(),
    },
    roots,
    { recheckMs, debounceMs: 20 },
  );
  watchers.push(watcher);
  return { watcher, status: watcher.start() };
}

const totals = (): Totals =>
  reportTotals(usageReport(db, { since: new Date('2020-01-01'), until: new Date('2100-01-01'), by: 'day' }));

async function until(what: string, ok: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Wait until `expected` is in the ledger, and a while longer: nothing more may come. */
async function settlesAt(expected: Totals): Promise<void> {
  await until(`totals ${JSON.stringify(expected)} (have ${JSON.stringify(totals())})`, () => {
    const t = totals();
    return t.requests >= expected.requests && t.output >= expected.output;
  });
  await new Promise((r) => setTimeout(r, 300));
  expect(totals()).toEqual(expected);
}

/** Give the watcher time to see a change and import it (used only where nothing may change). */
const aWhile = () => new Promise((r) => setTimeout(r, 400));

describe('transcript watcher', () => {
  it('imports what was there at start, then each append, each request once', async () => {
    const file = join(projects, '-repo', 's1.jsonl');
    const first = transcriptBytes(50_000, 'a');
    writeFileSync(file, first.text);
    startWatcher();
    await settlesAt(first.totals);
    let expected = first.totals;
    for (const prefix of ['b', 'c', 'd']) {
      const more = transcriptBytes(30_000, prefix);
      appendFileSync(file, more.text);
      expected = addTotals(expected, more.totals);
      await settlesAt(expected);
    }
    // A new session's file in a new project directory, made after the start.
    const later = join(projects, '-other-repo');
    mkdirSync(later);
    const other = transcriptBytes(20_000, 'e');
    writeFileSync(join(later, 's2.jsonl'), other.text);
    await settlesAt(addTotals(expected, other.totals));
  });

  it('a burst of writes never runs two imports at once, and counts each request once', async () => {
    const file = join(projects, '-repo', 'burst.jsonl');
    writeFileSync(file, '');
    startWatcher();
    let expected = noTotals();
    for (let i = 0; i < 200; i++) {
      const piece = transcriptBytes(3_000, `burst${i}`);
      appendFileSync(file, piece.text);
      expected = addTotals(expected, piece.totals);
      if (i % 20 === 0) await new Promise((r) => setTimeout(r, 5));
    }
    await settlesAt(expected);
    // Several imports ran (the burst outlasted one), one at a time, each within one turn of the loop.
    expect(imports.begun).toBeGreaterThan(1);
    expect(imports.most).toBe(1);
    expect(imports.spanned).toBe(0);
  });

  it('a half-written last line waits for its end, and counts once — also across a restart', async () => {
    const file = join(projects, '-repo', 'half.jsonl');
    const line = assistantLine({ id: 'msg_half', output: 7 });
    writeFileSync(file, line.slice(0, 100));
    const first = startWatcher().watcher;
    await aWhile();
    expect(totals().requests).toBe(0);
    // The daemon stops with the line half written; the next one finishes it.
    await first.stop();
    appendFileSync(file, line.slice(100, 200));
    startWatcher();
    await aWhile();
    expect(totals().requests).toBe(0);
    appendFileSync(file, `${line.slice(200)}\n`);
    await settlesAt({ requests: 1, input: 10, output: 7, cacheRead: 3, cacheCreation: 2 });
  });

  it('a truncated or replaced file is read again from the start without counting anything twice', async () => {
    const file = join(projects, '-repo', 'rewritten.jsonl');
    const a = transcriptBytes(20_000, 'ra');
    writeFileSync(file, a.text);
    startWatcher();
    await settlesAt(a.totals);
    // Truncated, then written again with the same requests and a new one.
    truncateSync(file, 0);
    const b = transcriptBytes(5_000, 'rb');
    writeFileSync(file, a.text + b.text);
    let expected = addTotals(a.totals, b.totals);
    await settlesAt(expected);
    // Replaced (a new inode), with all of it and more.
    const c = transcriptBytes(5_000, 'rc');
    writeFileSync(`${file}.tmp`, a.text + b.text + c.text);
    renameSync(`${file}.tmp`, file);
    expected = addTotals(expected, c.totals);
    await settlesAt(expected);
    // Shrunk to less than was read, with a new request at the end.
    const d = transcriptBytes(2_000, 'rd');
    writeFileSync(file, d.text);
    await settlesAt(addTotals(expected, d.totals));
  });

  it('a directory that does not exist is warned about and watched once it does', async () => {
    const later = join(dir, 'later');
    const { status } = startWatcher([{ dir: later, origin: 'config' }], 200);
    expect(status.missing).toEqual([later]);
    expect(logged.find((l) => l.level === 'warn')?.message).toMatch(/no such directory/);
    mkdirSync(join(later, 'p'), { recursive: true });
    const t = transcriptBytes(10_000, 'late');
    writeFileSync(join(later, 'p', 's.jsonl'), t.text);
    await settlesAt(t.totals);
  });

  it('symbolic links are not followed (a loop, a link to a file elsewhere)', async () => {
    const outside = join(dir, 'outside');
    mkdirSync(outside);
    const elsewhere = transcriptBytes(5_000, 'elsewhere');
    writeFileSync(join(outside, 'other.jsonl'), elsewhere.text);
    symlinkSync(projects, join(projects, '-repo', 'loop'));
    symlinkSync(join(outside, 'other.jsonl'), join(projects, '-repo', 'linked.jsonl'));
    symlinkSync(outside, join(projects, 'linked-dir'));
    const own = transcriptBytes(5_000, 'own');
    writeFileSync(join(projects, '-repo', 'own.jsonl'), own.text);
    startWatcher();
    await settlesAt(own.totals);
    // A link made later is not followed either.
    symlinkSync(join(outside, 'other.jsonl'), join(projects, '-repo', 'linked-later.jsonl'));
    appendFileSync(join(outside, 'other.jsonl'), transcriptBytes(1_000, 'more').text);
    await aWhile();
    expect(totals()).toEqual(own.totals);
  });

  it('files that are not transcripts change nothing and stop nothing', async () => {
    const repo = join(projects, '-repo');
    writeFileSync(join(repo, 'notes.txt'), assistantLine({ id: 'msg_txt' }));
    writeFileSync(join(repo, '.hidden.jsonl'), `${assistantLine({ id: 'msg_hidden' })}\n`);
    writeFileSync(
      join(repo, 'binary.jsonl'),
      Buffer.from(Array.from({ length: 100_000 }, (_, i) => (i * 7919) % 256)),
    );
    writeFileSync(
      join(repo, 'broken.jsonl'),
      '{"message":{"id":"msg_broken","usage":{"input_tokens":"many"}},"type":"assistant"}\n',
    );
    mkdirSync(join(repo, 'dir.jsonl'));
    execFileSync('mkfifo', [join(repo, 'pipe.jsonl')]);
    const real = transcriptBytes(5_000, 'real');
    writeFileSync(join(repo, 'real.jsonl'), real.text);
    startWatcher();
    await settlesAt(real.totals);
    appendFileSync(join(repo, 'binary.jsonl'), Buffer.from([0, 1, 2, 0x0a, 0xff]));
    const more = transcriptBytes(5_000, 'real2');
    appendFileSync(join(repo, 'real.jsonl'), more.text);
    await settlesAt(addTotals(real.totals, more.totals));
    expect(logged.some((l) => l.level === 'warn' && l.message === 'transcript line skipped')).toBe(true);
  });

  it('a huge line: written in pieces it is looked through once, then counted; past 64 MB it is skipped', async () => {
    const file = join(projects, '-repo', 'huge.jsonl');
    const before = transcriptBytes(5_000, 'hb');
    writeFileSync(file, before.text);
    startWatcher();
    await settlesAt(before.totals);
    // A 20 MB record (an image dump), appended in 10 pieces: no import until its end is written.
    const big = assistantLine({ id: 'msg_big', output: 9, text: 'i'.repeat(20 * 1024 * 1024) });
    const begun = imports.begun;
    const step = Math.ceil(big.length / 10);
    for (let at = 0; at < big.length; at += step) {
      appendFileSync(file, big.slice(at, at + step));
      await new Promise((r) => setTimeout(r, 60));
    }
    expect(imports.begun).toBe(begun);
    appendFileSync(file, '\n');
    let expected = addTotals(before.totals, {
      requests: 1,
      input: 10,
      output: 9,
      cacheRead: 3,
      cacheCreation: 2,
    });
    await settlesAt(expected);
    // Longer than any line the scan takes: skipped with a warning, the lines after it counted.
    const after = transcriptBytes(5_000, 'ha');
    appendFileSync(file, `${'z'.repeat(65 * 1024 * 1024)},"type":"assistant","usage":{}\n${after.text}`);
    expected = addTotals(expected, after.totals);
    await settlesAt(expected);
    expect(logged.some((l) => JSON.stringify(l.fields ?? {}).includes('line longer than'))).toBe(true);
    expect(imports.spanned).toBe(0);
  }, 120_000);

  it("the sessions' homes: <slug>/claude/projects only, also of a session that starts later", async () => {
    const homes = join(dir, 'data', 'homes');
    mkdirSync(homes, { recursive: true });
    const root: WatchRoot = { dir: homes, origin: 'sessions', only: [['*', 'claude', 'projects']] };
    startWatcher([root]);
    // A session's first turn makes its home, then the engine writes its transcript into it.
    const projectsDir = join(homes, 'github-o-r-1', 'claude', 'projects', '-work');
    mkdirSync(projectsDir, { recursive: true });
    const t = transcriptBytes(10_000, 'home');
    writeFileSync(join(projectsDir, 's.jsonl'), t.text);
    // Elsewhere in the home (not transcripts), and another engine's home: not read.
    mkdirSync(join(homes, 'github-o-r-1', 'claude', 'todos'));
    writeFileSync(
      join(homes, 'github-o-r-1', 'claude', 'todos', 'x.jsonl'),
      transcriptBytes(2_000, 'todo').text,
    );
    writeFileSync(
      join(homes, 'github-o-r-1', 'claude', 'history.jsonl'),
      transcriptBytes(2_000, 'hist').text,
    );
    mkdirSync(join(homes, 'github-o-r-1', 'codex', 'projects'), { recursive: true });
    writeFileSync(
      join(homes, 'github-o-r-1', 'codex', 'projects', 'y.jsonl'),
      transcriptBytes(2_000, 'cx').text,
    );
    await settlesAt(t.totals);
  });

  it('stops: nothing is imported after stop()', async () => {
    const file = join(projects, '-repo', 'stopped.jsonl');
    const a = transcriptBytes(5_000, 'sa');
    writeFileSync(file, a.text);
    const { watcher } = startWatcher();
    await settlesAt(a.totals);
    await watcher.stop();
    appendFileSync(file, transcriptBytes(5_000, 'sb').text);
    await aWhile();
    expect(totals()).toEqual(a.totals);
  });
});
