import type { Logger } from '../../log/logger.js';
import type { Tmux } from '../../runners/tmux/tmux.js';
import type { TakeoverView } from '../protocol.js';
import { type WindowSize, windowSize } from './window.js';

/**
 * How the hub keeps its word on a held session fresh when the change did not come through it: a take
 * over or hand back by another process (`the-loop sessions takeover|handback` writes SQLite; the daemon
 * hears nothing), a window resized by someone other than the writer (the tmux runner's keepWindowSize
 * at each turn, `tmux resize-window` by hand). Both are read again on a timer.
 */

/**
 * Once a second: a person who hands back from the CLI expects the browser's keys to stop about as fast
 * as they can switch windows and look, and a viewer's terminal to follow a resize before they notice it
 * wrong; one store read and one `tmux display` per held session a second cost next to nothing.
 */
export const POLL_MS = 1000;

/** Where a poll reads: the store's take over of a session (null: none, or the session is not active). */
export interface FreshSources {
  tmux: Tmux;
  logger: Logger;
  takeoverOf(sessionId: string): Promise<TakeoverView | null>;
}

/** What a poll found; a failed read is undefined (take over) or null (size): nothing to apply. */
export interface Fresh {
  takeover: TakeoverView | null | undefined;
  size: WindowSize | null;
}

/**
 * Both reads at once. Their failures are logged at debug and ignored: a store busy for a moment or a
 * tmux session that just went (its viewers' clients exit, which ends them) is no news for the hub.
 */
export async function readFresh(src: FreshSources, sessionId: string, target: string): Promise<Fresh> {
  const quiet = (what: string) => (error: unknown) => {
    src.logger.debug(`console terminal: ${what} not read`, { sessionId, error });
    return undefined;
  };
  const [takeover, size] = await Promise.all([
    Promise.resolve()
      .then(() => src.takeoverOf(sessionId))
      .catch(quiet('take over')),
    Promise.resolve()
      .then(() => windowSize(src.tmux, target))
      .then((r) => (r.ok ? r.size : quiet('window size')(r.why)))
      .catch(quiet('window size')),
  ]);
  return { takeover, size: size ?? null };
}

/**
 * Run `poll` every `every` ms, one at a time (a slow one makes the next tick skip, not pile up). The
 * timer is unref'd (a held terminal alone does not keep the process alive); stop() ends it, and a poll
 * in flight then finishes on its own (the hub drops what it brings back once the session is not held).
 */
export function repeatPoll(poll: () => Promise<void>, logger: Logger, every = POLL_MS): { stop(): void } {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    void poll()
      .catch((error: unknown) => logger.debug('console terminal: poll failed', { error }))
      .finally(() => {
        running = false;
      });
  }, every);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
