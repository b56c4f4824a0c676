import type { Migration } from './index.js';

/**
 * A person typing in a session (take over, from the console or the CLI): JSON { by, since,
 * principal }, cleared at hand back. While it is set, deliveries to the session's work item are held.
 */
export const sessionTakeover: Migration = {
  version: 16,
  name: 'session-takeover',
  sql: `
ALTER TABLE sessions ADD COLUMN takeover TEXT;
`,
};
