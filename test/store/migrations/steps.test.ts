import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { openDb } from '../../../src/store/db.js';
import type { Migration } from '../../../src/store/migrations/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const registry = () => {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-migrate-'));
  dirs.push(dir);
  return join(dir, 'the-loop.db');
};

const table = (version: number, name: string): Migration => ({
  version,
  name,
  sql: `CREATE TABLE ${name} (id INTEGER PRIMARY KEY);`,
});
const failing = (version: number): Migration => ({
  version,
  name: 'fails',
  sql: 'SELECT 1;',
  fill: () => {
    throw new Error('the fill failed');
  },
});
const state = (path: string) => {
  const db = new Database(path, { readonly: true });
  try {
    return {
      versions: db.prepare('SELECT version FROM schema_migrations ORDER BY version').pluck().all(),
      tables: db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").pluck().all(),
    };
  } finally {
    db.close();
  }
};

describe('migrations', () => {
  it('make a new registry in one transaction: all of them, or none when one fails', () => {
    const path = registry();
    expect(() => openDb(path, [table(1, 'a'), table(2, 'b'), failing(3)])).toThrow(/the fill failed/);
    expect(state(path)).toEqual({ versions: [], tables: ['schema_migrations'] });
    openDb(path, [table(1, 'a'), table(2, 'b')]).close();
    expect(state(path)).toEqual({ versions: [1, 2], tables: ['a', 'b', 'schema_migrations'] });
  });

  it('upgrade an existing registry one at a time: those before a failing one stay applied', () => {
    const path = registry();
    openDb(path, [table(1, 'a')]).close();
    expect(() => openDb(path, [table(1, 'a'), table(2, 'b'), failing(3), table(4, 'd')])).toThrow(
      /the fill failed/,
    );
    expect(state(path)).toEqual({ versions: [1, 2], tables: ['a', 'b', 'schema_migrations'] });
  });
});
