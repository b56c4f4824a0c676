import { setImmediate as yieldToLoop } from 'node:timers/promises';
import type { Inbox, PruneReport } from '../core/ports/inbox.js';
import type { Logger } from '../log/logger.js';
import { KEEP_FOREVER } from './retention.js';

/** Hourly: a body outlives its retention by at most this long, and an idle daemon does little. */
export const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

export interface RetentionTimer {
  /** Clears the timer and waits for a pass in progress to stop between two batches. */
  stop(): Promise<void>;
}

/**
 * The daemon's retention: one pass at start, then one every `intervalMs`. A pass prunes in small
 * transactions and yields to the event loop between them, so webhooks keep being accepted while a
 * large backlog goes (a SQLite inbox blocks the loop while a statement runs). A failed pass is logged
 * and the next one tries again; it never takes the daemon down.
 */
export function startRetention(deps: {
  inbox: Pick<Inbox, 'prune'>;
  retainDays: number;
  logger: Logger;
  intervalMs?: number;
  now?: () => Date;
}): RetentionTimer {
  if (deps.retainDays === KEEP_FOREVER) return { stop: async () => {} };
  let stopped = false;
  let pass: Promise<void> | undefined;
  const run = () => {
    pass ??= prunePass(deps, () => stopped).finally(() => {
      pass = undefined;
    });
  };
  const first = setTimeout(run, 0);
  const timer = setInterval(run, deps.intervalMs ?? PRUNE_INTERVAL_MS);
  // The daemon's servers keep the process alive; these must not on their own.
  first.unref();
  timer.unref();
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(first);
      clearInterval(timer);
      await pass;
    },
  };
}

async function prunePass(
  deps: { inbox: Pick<Inbox, 'prune'>; retainDays: number; logger: Logger; now?: () => Date },
  stopped: () => boolean,
): Promise<void> {
  const total = { pruned: 0, bytes: 0 };
  let report: PruneReport | undefined;
  try {
    do {
      report = await deps.inbox.prune({ retainDays: deps.retainDays, now: deps.now?.() });
      total.pruned += report.pruned;
      total.bytes += report.bytes;
      await yieldToLoop();
    } while (report.more && report.pruned > 0 && !stopped());
  } catch (error) {
    deps.logger.warn('inbox retention pass failed; the next one tries again', { error });
  }
  if (total.pruned > 0) {
    deps.logger.info('inbox retention: dropped the bodies of finished deliveries', {
      deliveries: total.pruned,
      bytes: total.bytes,
      cutoff: report?.cutoff,
      retainDays: deps.retainDays,
    });
  }
}
