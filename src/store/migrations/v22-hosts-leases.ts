import type { Migration } from './index.js';

/**
 * Several daemons on several hosts sharing one PostgreSQL store (issue 17, docs/scale-out.md).
 *
 * PostgreSQL: `hosts` (each daemon's registration and heartbeat) and `leases` (which host owns which
 * work item, under which epoch), both owned by the host store (store/postgres/hosts.ts). Every
 * instant there is the database's (`timestamptz`, `now()`): hosts' clocks may disagree.
 *
 * A lease row is never deleted (a trigger refuses it): the row is the work item's epoch record, so
 * an epoch never goes backwards. Letting go of a lease (released, or reaped after its holder died)
 * only marks it `ended`; the next holder takes the same row with the epoch + 1.
 *
 * Both stores: a turn records the host that ran it and the lease epoch it ran under (null for a
 * turn of a one-host store), so recovery after a host's death settles exactly that host's turns.
 * SQLite gets the two columns too (it is one host): the stores keep the same turns columns, so
 * `store copy` carries them whole.
 */
export const hostsLeases: Migration = {
  version: 22,
  name: 'hosts-leases',
  sql: `
ALTER TABLE turns ADD COLUMN host_id TEXT;
ALTER TABLE turns ADD COLUMN epoch INTEGER;
`,
  postgres: `
CREATE TABLE hosts (
  id           TEXT COLLATE "C" PRIMARY KEY,
  -- Grows at each start of the same id: a heartbeat of an earlier start is refused.
  incarnation  BIGINT NOT NULL,
  labels       TEXT[] NOT NULL DEFAULT '{}',
  engines      TEXT[] NOT NULL DEFAULT '{}',
  capacity     BIGINT NOT NULL CHECK (capacity >= 0),
  address      TEXT,
  status       TEXT NOT NULL CHECK (status IN ('up', 'draining', 'down')),
  started_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  heartbeat_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE leases (
  work_item   TEXT COLLATE "C" PRIMARY KEY,
  -- The holder (or, once ended, the last holder).
  host_id     TEXT NOT NULL REFERENCES hosts (id),
  incarnation BIGINT NOT NULL,
  -- Grows by one each time the lease changes hands (never reset: the row is never deleted).
  epoch       BIGINT NOT NULL CHECK (epoch > 0),
  expires_at  TIMESTAMPTZ NOT NULL,
  -- The length the holder last renewed it for: a lease handed over to a move's target gets as long.
  seconds     DOUBLE PRECISION NOT NULL CHECK (seconds > 0),
  -- Being moved: the holder finishes its running turn, claims nothing new, then lets go.
  draining    BOOLEAN NOT NULL DEFAULT false,
  moving_to   TEXT REFERENCES hosts (id),
  -- Let go: released by its holder, or reaped after it expired (returned once for recovery).
  ended       BOOLEAN NOT NULL DEFAULT false
);
CREATE INDEX leases_host ON leases (host_id, incarnation) WHERE NOT ended;
CREATE INDEX leases_expiry ON leases (expires_at) WHERE NOT ended;

CREATE FUNCTION leases_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'a lease row is never deleted: it keeps the work item''s epoch (mark it ended)';
END
$$;
CREATE TRIGGER leases_kept BEFORE DELETE ON leases FOR EACH ROW EXECUTE FUNCTION leases_kept();

ALTER TABLE turns ADD COLUMN host_id TEXT;
ALTER TABLE turns ADD COLUMN epoch BIGINT;
`,
};
