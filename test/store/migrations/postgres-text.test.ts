import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openDb } from '../../../src/store/db.js';
import { MIGRATIONS } from '../../../src/store/migrations/index.js';
import { POSTGRES_BASELINE_VERSION } from '../../../src/store/postgres/baseline.js';

describe('the one migration list, for both stores', () => {
  it('every migration after the PostgreSQL baseline has a PostgreSQL text', () => {
    const later = MIGRATIONS.filter((m) => m.version > POSTGRES_BASELINE_VERSION);
    expect(later.length).toBeGreaterThan(0);
    const missing = later.filter((m) => !m.postgres?.trim()).map((m) => `${m.version} ${m.name}`);
    expect(missing).toEqual([]);
  });

  it('versions are unique and in order', () => {
    const versions = MIGRATIONS.map((m) => m.version);
    expect(versions).toEqual([...new Set(versions)].sort((a, b) => a - b));
  });

  it('22 gives a SQLite registry the turns columns PostgreSQL has (host_id, epoch)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-v22-'));
    try {
      const db = openDb(join(dir, 'the-loop.db'));
      const columns = (db.prepare('PRAGMA table_info(turns)').all() as Array<{ name: string }>).map(
        (c) => c.name,
      );
      db.close();
      expect(columns).toEqual(expect.arrayContaining(['host_id', 'epoch']));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
