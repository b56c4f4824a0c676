import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Ledger } from '../../src/ledger/ledger.js';
import { priceTable } from '../../src/ledger/pricing.js';
import { scanTranscripts } from '../../src/ledger/scan.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteLedgerStore } from '../../src/store/sqlite/ledger.js';
import { SqliteScanCursors } from '../../src/store/sqlite/scan-files.js';
import { SqliteSessionStore } from '../../src/store/sqlite/sessions.js';
import { transcriptBytes } from '../helpers/transcripts.js';

/** scanTranscripts' progress (bytes read of the total, piece by piece) and its `files` option, on real files. */

let dir: string;
let db: Db;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-scan-progress-'));
  mkdirSync(join(dir, 'projects', '-repo'), { recursive: true });
  db = openDb(join(dir, 'data', 'the-loop.db'));
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const deps = () => ({
  ledger: new Ledger(new SqliteLedgerStore(db), priceTable()),
  cursors: new SqliteScanCursors(db),
  sessions: new SqliteSessionStore(db, { scrub: (t: string) => t }),
});

describe('scanTranscripts progress', () => {
  it('reports bytes read of the total after each piece, up to the total', async () => {
    const files: string[] = [];
    for (let i = 0; i < 6; i++) {
      const file = join(dir, 'projects', '-repo', `s${i}.jsonl`);
      writeFileSync(file, transcriptBytes(200_000, `p${i}`).text);
      files.push(file);
    }
    const seen: Array<[number, number]> = [];
    const summary = await scanTranscripts(deps(), [join(dir, 'projects')], {
      // This thread alone (worker threads run the built scan-worker.js), in pieces.
      workers: 1,
      threadThresholdBytes: 0,
      pieceBytes: 300_000,
      onProgress: (done, total) => seen.push([done, total]),
    });
    expect(summary.records).toBeGreaterThan(0);
    expect(seen.length).toBeGreaterThan(1);
    const total = summary.bytesRead;
    for (const [i, [done, t]] of seen.entries()) {
      expect(t).toBe(total);
      if (i > 0) expect(done).toBeGreaterThan(seen[i - 1]?.[0] ?? 0);
    }
    expect(seen.at(-1)?.[0]).toBe(total);
  });

  it('files: only the files named are read', async () => {
    const a = join(dir, 'projects', '-repo', 'a.jsonl');
    const b = join(dir, 'projects', '-repo', 'b.jsonl');
    writeFileSync(a, transcriptBytes(20_000, 'fa').text);
    writeFileSync(b, transcriptBytes(20_000, 'fb').text);
    const summary = await scanTranscripts(deps(), [join(dir, 'projects')], { files: [b] });
    expect(summary.files).toBe(1);
    expect(summary.filesRead).toBe(1);
    expect([...(await deps().cursors.all()).keys()]).toEqual([b]);
  });
});
