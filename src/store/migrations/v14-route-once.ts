import type { Migration } from './index.js';

/**
 * Route once: a delivery is routed when it arrives and stored with what the router made of it, so
 * the dispatcher executes what was stored and never parses or routes the body again.
 *
 * `plan` (JSON): for start and deliver the turn plan — the rendered prompt, engine, runner, repository
 * path, workspace, repository, author and trigger; for close the repository; NULL for ignore and
 * reject, for rows an older version stored unrouted or routed without it (routed once more when
 * first run, then stored), and once retention dropped the body (the prompt is outside text too).
 *
 * `held_reason`: why a queued delivery waits (its session is held), no longer written into `reason`
 * behind a `held: ` prefix; the notes already there move.
 */
export const routeOnce: Migration = {
  version: 14,
  name: 'route-once',
  sql: `
ALTER TABLE deliveries ADD COLUMN plan TEXT;
ALTER TABLE deliveries ADD COLUMN held_reason TEXT;
UPDATE deliveries SET held_reason = substr(reason, 7), reason = NULL WHERE substr(reason, 1, 6) = 'held: ';
`,
};
