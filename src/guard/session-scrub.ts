import { join } from 'node:path';
import type { Logger } from '../log/logger.js';
import { type ByteScrubber, scrubFilesInPlace } from '../log/scrub-files.js';

const MAX_REMEMBERED = 50_000;
const MAX_NAMED_SKIPS = 10;

/** The tmux launcher's environment file: read whole and deleted by the launcher, never touched. */
const LAUNCH_ENV_FILE = /^env-[0-9a-f-]{36}\.json$/;

/**
 * After each turn, the files a session's engine wrote under the data directory — its home in the
 * sandbox (`homes/<slug>/`: transcripts, todos, file history) and its state dir (`sessions/<slug>/`:
 * hook events) — are scrubbed in place (log/scrub-files.ts): a key the model echoed is masked there
 * as it is in the registry. Files found clean and unchanged since are not read again.
 */
export function createSessionScrub(deps: {
  dataDir: string;
  scrubber: ByteScrubber;
  logger: Logger;
}): (slug: string) => void {
  const clean = new Map<string, string>();
  return (slug) => {
    if (!/^[a-z0-9-]+$/.test(slug)) return;
    const roots = [join(deps.dataDir, 'sessions', slug), join(deps.dataDir, 'homes', slug)];
    // Only a cache: a long-lived daemon forgets it now and then rather than grow it without bound.
    if (clean.size > MAX_REMEMBERED) clean.clear();
    try {
      const report = scrubFilesInPlace(roots, deps.scrubber, {
        clean,
        skip: (name) => LAUNCH_ENV_FILE.test(name),
      });
      for (const { path, ranges } of report.masked) {
        deps.logger.warn('masked secrets an engine left in a file', { path, ranges });
      }
      // Counted, with a few named: an engine making a million files must not make a million log lines.
      if (report.skipped.length > 0) {
        deps.logger.warn('could not scrub some files of the session', {
          slug,
          count: report.skipped.length,
          first: report.skipped.slice(0, MAX_NAMED_SKIPS),
        });
      }
    } catch (error) {
      deps.logger.error('could not scrub the files of a session', { slug, error });
    }
  };
}
