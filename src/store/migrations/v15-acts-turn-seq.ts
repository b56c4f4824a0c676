import type { Migration } from './index.js';

/**
 * An act keeps its turn's number in the session (shown by `the-loop acts`): the acts table's owner
 * reads only its own table, never `turns`. A turn's number never changes, so a copy cannot go stale.
 */
export const actsTurnSeq: Migration = {
  version: 15,
  name: 'acts-turn-seq',
  sql: `
ALTER TABLE acts ADD COLUMN turn_seq INTEGER;
UPDATE acts SET turn_seq = (SELECT seq FROM turns WHERE turns.id = acts.turn_id);
`,
};
