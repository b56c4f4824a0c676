import { randomUUID } from 'node:crypto';
import { retry } from '@octokit/plugin-retry';
import { throttling } from '@octokit/plugin-throttling';
import { Octokit } from '@octokit/rest';
import Bottleneck from 'bottleneck';
import type { Logger } from '../log/logger.js';

/**
 * The Octokit the client calls through: paced (our write and comment gaps), waiting out GitHub's
 * rate limits, retrying 5xx, logging to our logger at debug. It holds no credential: each call
 * names its own (the installation's token or the static one), so one Octokit serves every
 * installation.
 */

export interface OctokitOptions {
  baseUrl: string;
  userAgent: string;
  logger: Logger;
  pacing: { writeGapMs: number; commentGapMs: number; writesPerHour?: number | undefined };
  /** The unit of `retry-after` and of the 5xx backoff, in ms (GitHub's: seconds). Tests make it small. */
  retryBaseMs?: number | undefined;
}

/** Rate-limit waits taken for one request before it is given up. */
const RATE_LIMIT_RETRIES = 3;

/** Every 4xx: a refusal that asking again will not change (rate limits are the throttle's, not retry's). */
const DO_NOT_RETRY = Array.from({ length: 100 }, (_, i) => 400 + i);

const PacedOctokit = Octokit.plugin(throttling, retry);
export type PacedOctokit = InstanceType<typeof PacedOctokit>;

/** Bottleneck 2.19 keeps a Group's cleanup timer here (unref'd) and has no call that stops it. */
type WithTimer = { interval?: ReturnType<typeof setInterval> };

/** The Octokit, and `close`: stop our limiters' timers (the client is done). */
export function createOctokit(options: OctokitOptions): { octokit: PacedOctokit; close(): void } {
  const { logger } = options;
  const base = options.retryBaseMs ?? 1000;
  // Octokit's own lines (deprecations, throttle notes) are ours at debug: they are not the daemon's
  // to print, and their extra arguments (request options) are dropped unread.
  const debug = (message: unknown) => logger.debug(`octokit: ${String(message).slice(0, 300)}`);
  const onLimit =
    (kind: string) =>
    (retryAfter: number, options: { method?: string; url?: string }, _o: unknown, retryCount: number) => {
      const again = retryCount < RATE_LIMIT_RETRIES;
      logger.warn(`GitHub ${kind} rate limit: ${again ? 'waiting, then asking again' : 'giving up'}`, {
        method: options.method,
        route: options.url,
        retryAfter,
        retryCount,
      });
      return again;
    };
  const write = new Bottleneck.Group({ maxConcurrent: 1, minTime: options.pacing.writeGapMs });
  const notifications = new Bottleneck.Group({ maxConcurrent: 1, minTime: options.pacing.commentGapMs });
  const octokit = new PacedOctokit({
    baseUrl: options.baseUrl,
    userAgent: options.userAgent,
    log: { debug, info: debug, warn: debug, error: debug },
    throttle: {
      // Our own limiters, keyed by an id of this client's: two clients never share a gap.
      id: `the-loop-${randomUUID()}`,
      write,
      notifications,
      retryAfterBaseValue: base,
      onRateLimit: onLimit('primary'),
      onSecondaryRateLimit: onLimit('secondary'),
    },
    retry: { doNotRetry: DO_NOT_RETRY, retryAfterBaseValue: base },
  });
  serializeWrites(octokit, options.pacing.writeGapMs, options.pacing.writesPerHour ?? 450, logger);
  const close = () => {
    for (const group of [write, notifications]) clearInterval((group as unknown as WithTimer).interval);
  };
  return { octokit, close };
}

/** Minting an installation token: a write by its method, but the writes themselves wait on it. */
const AUTH_PATH = /^\/app\/installations\/[^/]+\/access_tokens$/;

/**
 * Writes one at a time, each sent at least `gapMs` after the one before it ended,
 * around everything else (the throttle's gates, its rate-limit waits, retries): GitHub asks for
 * serial writes about a second apart (its secondary rate limits). The throttle alone gates a write's
 * turn, not its sending: a comment waiting on its own gap let the next edit go first, moments after
 * the last write. Reads and token minting are not queued.
 */
function serializeWrites(octokit: PacedOctokit, gapMs: number, perHour: number, logger: Logger): void {
  // The gap is kept after a write ended, not after it was let through: a write held up on its way
  // (its comment gap, a token being minted, a retry-after) must not let the next one follow at once.
  const rest = () => new Promise<void>((resolve) => setTimeout(resolve, gapMs).unref());
  const hour = hourlyBudget(perHour, logger);
  let last: Promise<void> = Promise.resolve();
  octokit.hook.wrap('request', (request, options) => {
    // A GitHub that takes the connection and never answers must not hold the writes for minutes.
    options.request = {
      ...options.request,
      signal: options.request?.signal ?? AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    };
    const method = String(options.method ?? 'GET').toUpperCase();
    const path = new URL(String(options.url), 'http://github.invalid').pathname;
    if (method === 'GET' || method === 'HEAD' || AUTH_PATH.test(path)) return request(options);
    const sent = last.then(async () => {
      await hour();
      return request(options);
    });
    // The caller has its answer at once; the next write waits for the end of this one, and the gap.
    last = sent.then(rest, rest);
    return sent;
  });
}

/** A request GitHub has not answered in this long is given up (and retried by the tracker). */
const REQUEST_TIMEOUT_MS = 30_000;

/**
 * At most `perHour` writes in any hour (GitHub: about 500 content-creating requests an hour):
 * resolves when the next write may go, saying once per stretch that writes wait.
 */
function hourlyBudget(perHour: number, logger: Logger): () => Promise<void> {
  const sent: number[] = [];
  let said = false;
  return async () => {
    for (;;) {
      const now = Date.now();
      while (sent.length > 0 && (sent[0] ?? 0) <= now - 3_600_000) sent.shift();
      if (sent.length < perHour) {
        sent.push(now);
        said = false;
        return;
      }
      const wait = (sent[0] ?? now) + 3_600_000 - now;
      if (!said)
        logger.warn('GitHub: the hourly write budget is spent; writes wait', { perHour, waitMs: wait });
      said = true;
      await new Promise<void>((resolve) => setTimeout(resolve, wait).unref());
    }
  };
}
