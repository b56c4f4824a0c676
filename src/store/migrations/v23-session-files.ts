import type { Migration } from './index.js';

/**
 * A process-runner session's files carried between hosts (issue 17, docs/scale-out.md): after every
 * turn the host that ran it saves the engine's conversation file (Claude Code's
 * `projects/<cwd>/<session id>.jsonl` under its config dir) here, and the host that runs the
 * session's next turn — after a failover or `sessions move` — restores it first, so `--resume` finds
 * the earlier conversation. Owned by the session-file store (store/postgres/session-files.ts).
 *
 * PostgreSQL only: one host keeps its sessions' files where the engine wrote them, so SQLite gets no
 * table (the statement below is a comment).
 *
 * `name` is the file's path relative to the engine's config directory, checked against the
 * engine's pattern before it is saved and again before it is restored (the database never chooses
 * where a host writes). `body` is the file as saved, secrets masked; PostgreSQL compresses it
 * (TOAST).
 */
export const sessionFiles: Migration = {
  version: 23,
  name: 'session-files',
  sql: `-- PostgreSQL only (see the comment of this migration).
SELECT 1;
`,
  postgres: `
CREATE TABLE session_files (
  session_id TEXT NOT NULL REFERENCES sessions (id),
  name       TEXT COLLATE "C" NOT NULL,
  body       BYTEA NOT NULL,
  -- sha256 of body, hex: a host whose copy matches has nothing to restore.
  digest     TEXT NOT NULL,
  bytes      BIGINT NOT NULL CHECK (bytes >= 0),
  -- The turn after which it was saved, and the host that ran it.
  turn_id    BIGINT NOT NULL REFERENCES turns (id),
  host_id    TEXT NOT NULL,
  saved_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (session_id, name)
);
`,
};
