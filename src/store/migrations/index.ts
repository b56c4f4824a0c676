import type { Db } from '../db.js';
import { workItemIdentity } from './v12-work-item-identity.js';
import { inboxRetention } from './v13-inbox-retention.js';
import { routeOnce } from './v14-route-once.js';
import { actsTurnSeq } from './v15-acts-turn-seq.js';
import { sessionTakeover } from './v16-takeover.js';
import { connectorAudit } from './v17-connector-audit.js';
import { cacheWrite1h } from './v18-cache-write-1h.js';
import { unpricedIndex } from './v19-unpriced-index.js';
import { usageHours } from './v20-usage-hours.js';
import { activeSessionsByAge } from './v21-active-sessions-by-age.js';
import { hostsLeases } from './v22-hosts-leases.js';
import { sessionFiles } from './v23-session-files.js';
import { githubStatus } from './v24-github-status.js';

/**
 * Versioned schema migrations, applied in order inside one transaction each. Never edit a shipped
 * migration: add the next one.
 */
export interface Migration {
  version: number;
  name: string;
  sql: string;
  /**
   * The migration rebuilds a table that others reference (SQLite cannot alter a CHECK): foreign key
   * enforcement is switched off around its transaction and the keys are checked before it commits,
   * as SQLite's documented table-rebuild procedure asks.
   */
  rebuildsTables?: boolean;
  /** Run after `sql`, in the same transaction: fills what SQL alone cannot (v20's rollup). */
  fill?: (db: Db) => void;
  /**
   * The same change for a PostgreSQL store. Required from version 22 on (PostgreSQL stores start
   * from a baseline at 21: store/postgres/baseline.ts); a test checks every later migration has it.
   */
  postgres?: string;
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'sessions-turns-events',
    sql: `
CREATE TABLE sessions (
  id                TEXT PRIMARY KEY,
  work_item         TEXT NOT NULL,
  slug              TEXT NOT NULL,
  engine            TEXT NOT NULL,
  runner            TEXT NOT NULL,
  engine_session_id TEXT,
  -- 1 once the engine confirmed the session exists (a session event): later turns resume it.
  engine_session_started INTEGER NOT NULL DEFAULT 0,
  cwd               TEXT NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('active', 'closed')),
  -- The engine's last reported running totals, for engines whose usage is per thread (JSON Usage).
  usage_baseline    TEXT,
  credential_kind   TEXT,
  credential_env    TEXT,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  closed_at         TEXT,
  close_reason      TEXT
);
-- One active session per work item.
CREATE UNIQUE INDEX sessions_one_active ON sessions (work_item) WHERE status = 'active';
CREATE INDEX sessions_work_item ON sessions (work_item, created_at);

CREATE TABLE turns (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id            TEXT NOT NULL REFERENCES sessions (id),
  seq                   INTEGER NOT NULL,
  prompt_digest         TEXT NOT NULL,
  prompt_bytes          INTEGER NOT NULL,
  status                TEXT NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
  end_reason            TEXT,
  started_at            TEXT NOT NULL,
  ended_at              TEXT,
  exit_code             INTEGER,
  exit_signal           TEXT,
  pid                   INTEGER,
  owner_pid             INTEGER,
  meter                 TEXT NOT NULL,
  model                 TEXT,
  input_tokens          INTEGER,
  output_tokens         INTEGER,
  cache_read_tokens     INTEGER,
  cache_creation_tokens INTEGER,
  reasoning_tokens      INTEGER,
  cost_usd              REAL,
  cost_basis            TEXT,
  error                 TEXT,
  UNIQUE (session_id, seq)
);
CREATE INDEX turns_status ON turns (status);

CREATE TABLE turn_events (
  turn_id INTEGER NOT NULL REFERENCES turns (id),
  seq     INTEGER NOT NULL,
  at      TEXT NOT NULL,
  type    TEXT NOT NULL,
  data    TEXT NOT NULL,
  PRIMARY KEY (turn_id, seq)
);
`,
  },
  {
    version: 2,
    name: 'inbox',
    sql: `
-- The durable inbox: one row per accepted delivery, committed before the HTTP answer.
CREATE TABLE deliveries (
  seq         INTEGER PRIMARY KEY AUTOINCREMENT,
  id          TEXT NOT NULL UNIQUE,
  source      TEXT NOT NULL CHECK (source IN ('github', 'manual')),
  event       TEXT NOT NULL,
  action      TEXT,
  received_at TEXT NOT NULL,
  body        TEXT NOT NULL,
  status      TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'failed', 'rejected', 'ignored')),
  route       TEXT,
  work_item   TEXT,
  reason      TEXT,
  attempts    INTEGER NOT NULL DEFAULT 0,
  turn_id     INTEGER,
  error       TEXT,
  updated_at  TEXT NOT NULL
);
CREATE INDEX deliveries_pending ON deliveries (status, seq);
CREATE INDEX deliveries_work_item ON deliveries (work_item, seq);
ALTER TABLE turns ADD COLUMN delivery_id TEXT;
CREATE INDEX turns_delivery ON turns (delivery_id);
`,
  },
  {
    version: 3,
    name: 'tmux-target',
    sql: `
-- The tmux session of a tmux-runner session: stored when created, never re-derived.
ALTER TABLE sessions ADD COLUMN tmux_target TEXT;
`,
  },
  {
    version: 4,
    name: 'session-lost-ended',
    rebuildsTables: true,
    sql: `
-- A session can also end without being closed: 'lost' (its runner's resource vanished: the tmux
-- session was killed by hand, its server died) or 'ended' (the engine ended it: SessionEnd).
-- closed_at is when that was noticed, close_reason says what was seen.
CREATE TABLE sessions_v4 (
  id                TEXT PRIMARY KEY,
  work_item         TEXT NOT NULL,
  slug              TEXT NOT NULL,
  engine            TEXT NOT NULL,
  runner            TEXT NOT NULL,
  engine_session_id TEXT,
  engine_session_started INTEGER NOT NULL DEFAULT 0,
  cwd               TEXT NOT NULL,
  status            TEXT NOT NULL CHECK (status IN ('active', 'closed', 'lost', 'ended')),
  usage_baseline    TEXT,
  credential_kind   TEXT,
  credential_env    TEXT,
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL,
  closed_at         TEXT,
  close_reason      TEXT,
  tmux_target       TEXT
);
INSERT INTO sessions_v4 (id, work_item, slug, engine, runner, engine_session_id, engine_session_started,
  cwd, status, usage_baseline, credential_kind, credential_env, created_at, updated_at, closed_at,
  close_reason, tmux_target)
SELECT id, work_item, slug, engine, runner, engine_session_id, engine_session_started, cwd, status,
  usage_baseline, credential_kind, credential_env, created_at, updated_at, closed_at, close_reason,
  tmux_target FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_v4 RENAME TO sessions;
CREATE UNIQUE INDEX sessions_one_active ON sessions (work_item) WHERE status = 'active';
CREATE INDEX sessions_work_item ON sessions (work_item, created_at);
`,
  },
  {
    version: 5,
    name: 'usage-ledger',
    sql: `
-- One row per metered engine request (transcripts) or per turn (result events): what it used, what
-- that would cost at list price (or what the engine said), who pays. Unique per (meter, source id):
-- reading a transcript again, or a replayed event, never counts anything twice.
CREATE TABLE usage_ledger (
  id                    INTEGER PRIMARY KEY AUTOINCREMENT,
  meter                 TEXT NOT NULL,
  source_id             TEXT NOT NULL,
  at                    TEXT NOT NULL,
  session_id            TEXT,
  work_item             TEXT,
  turn_id               INTEGER,
  engine                TEXT,
  runner                TEXT,
  model                 TEXT,
  input_tokens          INTEGER NOT NULL,
  output_tokens         INTEGER NOT NULL,
  cache_read_tokens     INTEGER NOT NULL,
  cache_creation_tokens INTEGER NOT NULL,
  reasoning_tokens      INTEGER NOT NULL,
  -- NULL: not priced (unknown model). Never 0 for unknown.
  cost_usd              REAL,
  cost_basis            TEXT CHECK (cost_basis IN ('engine-reported', 'list-price')),
  price_key             TEXT,
  payer_kind            TEXT NOT NULL CHECK (payer_kind IN ('api-key', 'subscription', 'cloud', 'unknown')),
  payer_id              TEXT,
  recorded_at           TEXT NOT NULL,
  UNIQUE (meter, source_id)
);
CREATE INDEX usage_ledger_at ON usage_ledger (at);
CREATE INDEX usage_ledger_session ON usage_ledger (session_id);
-- Runs nothing measured: reported as unknown ("Not included"), never as zero.
CREATE TABLE unmetered_drives (
  id         INTEGER PRIMARY KEY AUTOINCREMENT,
  at         TEXT NOT NULL,
  session_id TEXT,
  work_item  TEXT,
  turn_id    INTEGER UNIQUE,
  engine     TEXT,
  runner     TEXT,
  reason     TEXT NOT NULL
);
CREATE INDEX unmetered_drives_at ON unmetered_drives (at);
ALTER TABLE sessions ADD COLUMN payer_id TEXT;
`,
  },
  {
    version: 6,
    name: 'session-holds',
    sql: `
-- Why deliveries to an active session are held (JSON: kind, reason, figures, since), e.g. over-budget;
-- and what a person raised its ceilings by (JSON: turns, tokens, usd).
ALTER TABLE sessions ADD COLUMN hold TEXT;
ALTER TABLE sessions ADD COLUMN budget_raise TEXT;
`,
  },
  {
    version: 7,
    name: 'transcript-scan',
    sql: `
-- \`usage scan\`: how far each transcript file was read (a file that shrank or was replaced is read
-- again from the start; the ledger's unique key keeps that from counting anything twice).
CREATE TABLE scan_files (
  path       TEXT PRIMARY KEY,
  inode      INTEGER NOT NULL,
  size       INTEGER NOT NULL,
  offset     INTEGER NOT NULL,
  scanned_at TEXT NOT NULL
);
`,
  },
  {
    version: 8,
    name: 'ledger-partial-indexes',
    sql: `
-- Rows imported from transcript history mostly belong to no session: indexing only the rows that do
-- keeps a large import fast. Budgets look rows up by session and by work item.
DROP INDEX usage_ledger_session;
CREATE INDEX usage_ledger_session ON usage_ledger (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX usage_ledger_work_item ON usage_ledger (work_item) WHERE work_item IS NOT NULL;
`,
  },
  {
    version: 9,
    name: 'acts',
    sql: `
-- The acts audit: every consequential act a turn performed or tried (a push, a merge, a publish…),
-- found in its tool uses, settled with the tool's outcome, and judged against the repo's policy.
CREATE TABLE acts (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  turn_id      INTEGER NOT NULL REFERENCES turns (id),
  session_id   TEXT NOT NULL REFERENCES sessions (id),
  work_item    TEXT NOT NULL,
  engine       TEXT NOT NULL,
  runner       TEXT NOT NULL,
  seq          INTEGER NOT NULL,
  tool_use_id  TEXT,
  tool         TEXT NOT NULL,
  kind         TEXT NOT NULL,
  command      TEXT NOT NULL,
  detail       TEXT NOT NULL,
  evasion      TEXT,
  outcome      TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'blocked', 'unknown')),
  -- The policy's verdict: allow, or deny (with the rule); a denied act that was not blocked is a breach.
  verdict      TEXT NOT NULL CHECK (verdict IN ('allow', 'deny')),
  rule         TEXT,
  breach       INTEGER NOT NULL DEFAULT 0,
  at           TEXT NOT NULL,
  UNIQUE (turn_id, seq)
);
CREATE INDEX acts_session ON acts (session_id);
CREATE INDEX acts_work_item ON acts (work_item, at);
CREATE INDEX acts_at ON acts (at);
`,
  },
  {
    version: 10,
    name: 'ledger-turn-index',
    sql: `
-- A turn's rows are looked up when it ends (OTLP-metered turns, the accountability check): without
-- an index that read the whole ledger, which a transcript import makes large.
CREATE INDEX usage_ledger_turn ON usage_ledger (turn_id) WHERE turn_id IS NOT NULL;
`,
  },
  {
    version: 11,
    name: 'gateway',
    rebuildsTables: true,
    sql: `
-- The gateway's capability tokens: only a SHA-256 of each is kept. A token is valid while its
-- session is active and it is not revoked (a session that ends revokes its tokens).
CREATE TABLE gateway_tokens (
  hash       TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions (id),
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE INDEX gateway_tokens_session ON gateway_tokens (session_id);
-- Acts now come from two sources: the turn's commands (classified, best effort) and the wire (the
-- gateway saw the ref update or the API call: certain). Each source numbers its acts in a turn.
CREATE TABLE acts_v11 (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  turn_id      INTEGER NOT NULL REFERENCES turns (id),
  session_id   TEXT NOT NULL REFERENCES sessions (id),
  work_item    TEXT NOT NULL,
  engine       TEXT NOT NULL,
  runner       TEXT NOT NULL,
  source       TEXT NOT NULL DEFAULT 'command' CHECK (source IN ('command', 'wire')),
  seq          INTEGER NOT NULL,
  tool_use_id  TEXT,
  tool         TEXT NOT NULL,
  kind         TEXT NOT NULL,
  command      TEXT NOT NULL,
  detail       TEXT NOT NULL,
  evasion      TEXT,
  outcome      TEXT NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'blocked', 'unknown')),
  verdict      TEXT NOT NULL CHECK (verdict IN ('allow', 'deny')),
  rule         TEXT,
  breach       INTEGER NOT NULL DEFAULT 0,
  at           TEXT NOT NULL,
  UNIQUE (turn_id, source, seq)
);
INSERT INTO acts_v11 (id, turn_id, session_id, work_item, engine, runner, source, seq, tool_use_id, tool,
  kind, command, detail, evasion, outcome, verdict, rule, breach, at)
SELECT id, turn_id, session_id, work_item, engine, runner, 'command', seq, tool_use_id, tool, kind, command,
  detail, evasion, outcome, verdict, rule, breach, at FROM acts;
DROP TABLE acts;
ALTER TABLE acts_v11 RENAME TO acts;
CREATE INDEX acts_session ON acts (session_id);
CREATE INDEX acts_work_item ON acts (work_item, at);
CREATE INDEX acts_at ON acts (at);
-- A wire row whose response was cut before its final usage: figures as far as it got.
ALTER TABLE usage_ledger ADD COLUMN partial INTEGER NOT NULL DEFAULT 0;
-- What a turn ran under (sandbox, gateway, permission mode: JSON) and what it should warn about
-- (tool calls the engine refused: JSON array of strings).
ALTER TABLE turns ADD COLUMN guard TEXT;
ALTER TABLE turns ADD COLUMN warnings TEXT;
-- A TUI waiting for a person (a permission prompt): JSON { since, message }, cleared when it goes on.
ALTER TABLE sessions ADD COLUMN waiting TEXT;
`,
  },
  workItemIdentity,
  inboxRetention,
  routeOnce,
  actsTurnSeq,
  sessionTakeover,
  connectorAudit,
  cacheWrite1h,
  unpricedIndex,
  usageHours,
  activeSessionsByAge,
  hostsLeases,
  sessionFiles,
  githubStatus,
];
