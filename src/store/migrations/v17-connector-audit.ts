import type { Migration } from './index.js';

/**
 * The terminal connector's audit (`the-loop mcp`): one row per tool call of an operator agent. The
 * payload (text typed, keys, a command) is never kept — only its SHA-256 and its size — and every
 * text column is scrubbed of secrets before it is written (store/sqlite/drive-audit.ts).
 */
export const connectorAudit: Migration = {
  version: 17,
  name: 'connector-audit',
  sql: `
CREATE TABLE connector_audit (
  id             INTEGER PRIMARY KEY AUTOINCREMENT,
  at             TEXT NOT NULL,
  operator       TEXT NOT NULL,
  connection     TEXT NOT NULL,
  tool           TEXT NOT NULL,
  backend        TEXT,
  target_id      TEXT,
  target_name    TEXT,
  scope          TEXT,
  outcome        TEXT NOT NULL CHECK (outcome IN ('ok', 'error', 'refused')),
  code           TEXT,
  payload_sha256 TEXT,
  payload_bytes  INTEGER NOT NULL,
  detail         TEXT,
  work_item      TEXT
);
CREATE INDEX connector_audit_at ON connector_audit (at);
CREATE INDEX connector_audit_operator ON connector_audit (operator, at);
`,
};
