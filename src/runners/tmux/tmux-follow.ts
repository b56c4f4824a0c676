import { type RunOutcome, SHUTDOWN } from '../runner.js';
import type { HookEventsTail, NextResult } from './hook-events-tail.js';
import {
  endedByEngine,
  pause,
  type TmuxRunnerOptions,
  type TurnContext,
  tuiOutcome,
} from './tmux-session-state.js';
import { readTranscriptOnce, readTranscriptToEnd } from './tmux-transcript.js';

/** How long after Stop the transcript may take to receive the turn's last records. */
const TRANSCRIPT_GRACE_MS = 5000;
/** How often a running turn checks that its tmux session is still there. */
const PROBE_MS = 1000;
/** How often a running turn reads new transcript records (live events, interrupts). */
const TRANSCRIPT_POLL_MS = 250;
const END_EVENTS = ['Stop', 'StopFailure', 'SessionEnd'] as const;

type Why = 'gone' | 'interrupted' | undefined;

/** Calls `onGone` (once) when the session's pane is no longer running its program. */
export async function watchPane(
  options: TmuxRunnerOptions,
  target: string,
  signal: AbortSignal,
  onGone: () => void,
): Promise<void> {
  while (!signal.aborted) {
    await pause(PROBE_MS, signal);
    if (signal.aborted) return;
    const pane = await options.tmux.paneState(target);
    // `unknown` (tmux slow or failing) is not a verdict: ask again next time.
    if (pane.state === 'gone' || pane.state === 'dead') {
      onGone();
      return;
    }
  }
}

/** Reads the transcript while the turn runs: live events, and the interrupt a person may make. */
async function watchTranscript(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  signal: AbortSignal,
  onInterrupt: () => void,
): Promise<void> {
  while (!signal.aborted) {
    const markers = await readTranscriptOnce(options, ctx);
    if (markers.includes('interrupt')) {
      onInterrupt();
      return;
    }
    await pause(TRANSCRIPT_POLL_MS, signal);
  }
}

/**
 * Follow a delivered turn to its end: the engine's Stop / StopFailure / SessionEnd hook (with our
 * session id), an interrupt in the transcript, the tmux session vanishing, the backstop, or the
 * caller cancelling (Escape, as a person would) or stopping (the turn is left running, detached).
 */
export async function follow(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  deadline: number,
): Promise<RunOutcome> {
  const { input } = ctx;
  const waited = await awaitEnd(options, ctx, deadline);
  const { end } = waited;
  let why = waited.why;
  const base = tuiOutcome({ ok: false, endReason: 'result', error: null, endedAt: new Date() });
  if (end.ok && end.event.event === 'SessionEnd' && !endedByEngine(end.event.reason)) {
    // Ended from outside (its tmux session or server killed): the same as vanishing.
    why = 'gone';
  } else if (end.ok) {
    const event = end.event;
    await readTranscriptToEnd(options, ctx, event.event === 'Stop' ? TRANSCRIPT_GRACE_MS : 500);
    if (event.event === 'Stop') {
      input.onEvent({ type: 'turn-end', ok: true });
      return { ...base, ok: true, endReason: 'result', error: null };
    }
    const error = failureText(event);
    input.onEvent({ type: 'turn-end', ok: false, message: error });
    if (event.event === 'SessionEnd') {
      const reason = event.reason ?? 'no reason given';
      return {
        ...base,
        ok: false,
        endReason: 'result',
        error: `the engine ended its session during the turn (${reason})`,
        sessionGone: { status: 'ended', reason: `the engine ended its session (${reason})` },
      };
    }
    return { ...base, ok: false, endReason: 'result', error };
  }
  await readTranscriptToEnd(options, ctx, 0);
  return endedWithoutHook(options, ctx, base, end, why);
}

/** Wait for an end hook while the pane and the transcript are watched alongside. */
async function awaitEnd(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  deadline: number,
): Promise<{ end: NextResult; why: Why }> {
  const { input, target, sessionId } = ctx;
  const hooks = ctx.hooks as HookEventsTail;
  ctx.following = true;
  const stop = new AbortController();
  let why: Why;
  const halt = (reason: 'gone' | 'interrupted') => {
    why ??= reason;
    stop.abort();
  };
  const failed = (what: string) => (error: unknown) => {
    // A watcher that fails stops watching (reported); the hooks still end the turn.
    options.logger.warn(`${what} failed while following a turn`, { target, error });
  };
  const watchers = Promise.all([
    watchPane(options, target, stop.signal, () => halt('gone')).catch(failed('watching the pane')),
    watchTranscript(options, ctx, stop.signal, () => halt('interrupted')).catch(
      failed('reading the transcript'),
    ),
  ]);
  let end: NextResult;
  try {
    end = await hooks.next(
      { event: END_EVENTS, sessionId },
      {
        timeoutMs: Math.max(0, deadline - Date.now()),
        signal: AbortSignal.any(input.signal ? [stop.signal, input.signal] : [stop.signal]),
      },
    );
    if (!end.ok && why === 'gone') {
      // The engine's last hooks may land just before its pane goes: give them a moment.
      end = await hooks.next({ event: END_EVENTS, sessionId }, { timeoutMs: 500 });
    }
  } finally {
    stop.abort();
    await watchers;
  }
  return { end, why };
}

/** The turn ended without an end hook of the engine's own: interrupted, vanished, cancelled or backstop. */
async function endedWithoutHook(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  base: RunOutcome,
  end: NextResult,
  why: Why,
): Promise<RunOutcome> {
  const { input, target } = ctx;
  if (why === 'interrupted') {
    return { ...base, ok: false, endReason: 'interrupted', error: 'interrupted in the TUI (Escape)' };
  }
  if (why === 'gone') {
    return {
      ...base,
      ok: false,
      endReason: 'error',
      error: `tmux session ${target} vanished during the turn`,
      sessionGone: {
        status: 'lost',
        reason: `tmux session ${target} vanished during a turn (killed by hand, or its tmux server stopped)`,
      },
    };
  }
  const aborted = !end.ok && end.reason === 'aborted';
  if (aborted && input.signal?.reason === SHUTDOWN) {
    // The daemon is stopping: the TUI goes on with the turn; the next daemon adopts it.
    return { ...base, ok: false, endReason: 'cancel', error: null, detached: true };
  }
  if (aborted) {
    // Interrupt the TUI's turn the way a person would.
    await options.tmux.run(['send-keys', '-t', `=${target}:`, 'Escape']);
    return { ...base, ok: false, endReason: 'cancel', error: 'cancelled' };
  }
  return {
    ...base,
    ok: false,
    endReason: 'backstop',
    error: `no Stop hook before the backstop (defaults.backstopSeconds, counted from the turn's start); the TUI is left running in ${target}`,
  };
}

function failureText(event: {
  event: string;
  payload?: Readonly<Record<string, unknown>> | undefined;
}): string {
  const payload = event.payload ?? {};
  // One-word kinds only: the hook records no free text (the API's error text reaches the turn's
  // events from the transcript, scrubbed).
  const parts = [payload.error, payload.reason].filter((p): p is string => typeof p === 'string');
  return `the engine reported ${event.event}${parts.length ? ` (${parts.join(': ').slice(0, 200)})` : ''}`;
}
