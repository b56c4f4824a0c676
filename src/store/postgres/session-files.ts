import type { SessionFile, SessionFileMeta, SessionFileStore } from '../../core/ports/session-files.js';
import type { Pg } from './pg.js';
import { turnFenceHolds } from './session-fence.js';

interface MetaRow {
  name: string;
  digest: string;
  bytes: number;
  turn_id: number;
  host_id: string;
  saved_at: Date;
}

const META = 'name, digest, bytes, turn_id, host_id, saved_at';

const toMeta = (r: MetaRow): SessionFileMeta => ({
  name: r.name,
  digest: r.digest,
  bytes: r.bytes,
  turnId: r.turn_id,
  hostId: r.host_id,
  savedAt: r.saved_at.toISOString(),
});

/**
 * The owner of `session_files` (migration 23): a process-runner session's conversation files,
 * carried between the hosts sharing the store. A save is fenced by the turn it follows (the turn's
 * host and epoch, session-fence.ts): a host whose lease moved on writes nothing, and a save never
 * replaces one made after a later turn.
 */
export class PgSessionFiles implements SessionFileStore {
  constructor(
    private readonly db: Pg,
    /** This host's id (several hosts), recorded with each save and checked against the turn's. */
    private readonly host: string | null,
  ) {}

  async save(sessionId: string, file: Omit<SessionFile, 'hostId' | 'savedAt'>): Promise<boolean> {
    const changed = await this.db.run(
      `INSERT INTO session_files AS f (session_id, name, body, digest, bytes, turn_id, host_id)
       SELECT t.session_id, $2, $3, $4, $5, t.id, COALESCE(t.host_id, $6::text, '')
         FROM turns t
        WHERE t.id = $7 AND t.session_id = $1 AND ${turnFenceHolds('t', '$6')}
       ON CONFLICT (session_id, name) DO UPDATE
          SET body = EXCLUDED.body, digest = EXCLUDED.digest, bytes = EXCLUDED.bytes,
              turn_id = EXCLUDED.turn_id, host_id = EXCLUDED.host_id, saved_at = now()
        WHERE f.turn_id <= EXCLUDED.turn_id`,
      [sessionId, file.name, file.body, file.digest, file.bytes, this.host, file.turnId],
    );
    return changed > 0;
  }

  async list(sessionId: string): Promise<SessionFileMeta[]> {
    const rows = await this.db.rows<MetaRow>(
      `SELECT ${META} FROM session_files WHERE session_id = $1 ORDER BY name`,
      [sessionId],
    );
    return rows.map(toMeta);
  }

  async load(sessionId: string, name: string): Promise<SessionFile | undefined> {
    const row = await this.db.row<MetaRow & { body: Buffer }>(
      `SELECT ${META}, body FROM session_files WHERE session_id = $1 AND name = $2`,
      [sessionId, name],
    );
    return row && { ...toMeta(row), body: row.body };
  }
}
