import type { Migration } from './index.js';

/**
 * What has been said on GitHub about each delivery that runs a turn (issue 18,
 * core/ports/github-status.ts): its reaction, its tracking comment, its check run, the last phase
 * and body digest written. Durable, so a restarted daemon edits the same comment instead of adding
 * one, and finishes what a crash left "running". Owned by the status store
 * (store/sqlite/github-status.ts, store/postgres/github-status.ts).
 *
 * Keyed by the delivery: a delivery row is never deleted (retention only blanks its body,
 * migration 13), so the key references it. Both stores get the same columns with the same meanings
 * — flags as 0/1 integers and instants as ISO-8601 text, as the other tables of both stores keep
 * them — so `store copy` carries the table whole (a moved daemon edits the same comments). GitHub's
 * ids pass 2^32: BIGINT on PostgreSQL (SQLite's INTEGER is 64-bit already).
 *
 * The partial index serves `unfinished` (a restart's sweep) in its order, without reading the
 * finished rows, which are nearly all of them.
 */
export const githubStatus: Migration = {
  version: 24,
  name: 'github-status',
  sql: `
CREATE TABLE github_status (
  delivery_id  TEXT PRIMARY KEY REFERENCES deliveries (id),
  work_item    TEXT NOT NULL,
  reacted      INTEGER NOT NULL DEFAULT 0 CHECK (reacted IN (0, 1)),
  comment_id   INTEGER,
  check_run_id INTEGER,
  check_sha    TEXT,
  phase        TEXT CHECK (phase IN ('queued', 'running', 'held', 'finished')),
  digest       TEXT,
  final        INTEGER NOT NULL DEFAULT 0 CHECK (final IN (0, 1)),
  last_error   TEXT,
  created_at   TEXT NOT NULL,
  updated_at   TEXT NOT NULL
);
CREATE INDEX github_status_unfinished ON github_status (created_at, delivery_id) WHERE final = 0;
`,
  postgres: `
CREATE TABLE github_status (
  delivery_id  TEXT PRIMARY KEY REFERENCES deliveries (id),
  work_item    TEXT NOT NULL,
  reacted      BIGINT NOT NULL DEFAULT 0 CHECK (reacted IN (0, 1)),
  comment_id   BIGINT,
  check_run_id BIGINT,
  check_sha    TEXT,
  phase        TEXT CHECK (phase IN ('queued', 'running', 'held', 'finished')),
  digest       TEXT,
  final        BIGINT NOT NULL DEFAULT 0 CHECK (final IN (0, 1)),
  last_error   TEXT,
  -- Compared and sorted byte by byte, as SQLite's text is, whatever the database's collation.
  created_at   TEXT COLLATE "C" NOT NULL,
  updated_at   TEXT NOT NULL
);
-- Ties of created_at in delivery-id order, byte by byte (COLLATE "C"), as SQLite orders them.
CREATE INDEX github_status_unfinished ON github_status (created_at, delivery_id COLLATE "C") WHERE final = 0;
`,
};
