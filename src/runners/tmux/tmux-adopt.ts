import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { LoopError } from '../../core/errors.js';
import type { RunOutcome, RunTurnInput, SessionProbe } from '../runner.js';
import { HookEventsTail } from './hook-events-tail.js';
import { checkTarget } from './tmux.js';
import { follow } from './tmux-follow.js';
import { keepWindowSize } from './tmux-launch.js';
import {
  ACCEPT_MS,
  endedByEngine,
  loadState,
  openTurn,
  paneStateSure,
  releaseTurn,
  saveState,
  stateDir,
  type TmuxRunnerOptions,
} from './tmux-session-state.js';

/** Take over the turn a stopped daemon left running in the TUI, and follow it to its end. */
export async function adoptTurn(
  options: TmuxRunnerOptions,
  input: RunTurnInput & { turnId: number },
): Promise<RunOutcome | { adopted: false; reason: string }> {
  const ctx = openTurn(options, input, 'turn-start');
  const { state, hooks, target } = ctx;
  const mark = state.turn;
  let keepTurn = false;
  try {
    if (!hooks) return { adopted: false, reason: 'the engine reports no turn ends (no hooks) to follow' };
    if (!mark || mark.id !== input.turnId) {
      return { adopted: false, reason: 'the turn was not delivered yet when its daemon stopped' };
    }
    const pane = await paneStateSure(options, target);
    if (pane.state !== 'alive') return { adopted: false, reason: `tmux session ${target} is gone` };
    // Mid-turn: its size is fixed as it is (resizing would redraw the TUI under the turn).
    await keepWindowSize(options, target, false);
    if (mark.phase === 'delivering') {
      // The paste had not completed: nothing was submitted, so the delivery can run again.
      return { adopted: false, reason: 'its daemon stopped before the prompt was pasted' };
    }
    // Read the turn again from where it began: its events are re-derived from the transcript.
    state.transcript = mark.transcript && structuredClone(mark.transcript);
    if (mark.phase === 'pasted') {
      // The text is in the input box; its Enter may have been lost with the daemon. Confirm it, or
      // press Enter (as the delivery would have) — never paste it again.
      const sessionId = ctx.sessionId;
      let accepted = await hooks.next({ event: 'UserPromptSubmit', sessionId }, { timeoutMs: 1000 });
      if (!accepted.ok) {
        await options.tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys Enter');
        accepted = await hooks.next({ event: 'UserPromptSubmit', sessionId }, { timeoutMs: ACCEPT_MS });
      }
      if (!accepted.ok) {
        return {
          adopted: false,
          reason: `the prompt was pasted into ${target} but the engine never accepted it`,
        };
      }
      mark.phase = 'submitted';
      saveState(ctx.dir, state);
    }
    input.onAdopt?.();
    options.logger.info('adopted a running tmux turn', { target, turn: input.turnId });
    const outcome = await follow(options, ctx, Date.now() + input.backstopMs);
    keepTurn = outcome.detached === true;
    return outcome;
  } finally {
    releaseTurn(ctx, keepTurn || (mark !== undefined && mark.id === input.turnId && !hooks));
  }
}

/** Whether the session's TUI is still there and still ours; `check` runs when the pane is not alive. */
export async function probe(
  options: TmuxRunnerOptions,
  session: { slug: string; tmuxTarget: string | null; engineSessionId?: string | null },
  check: () => Promise<void>,
): Promise<SessionProbe> {
  if (!session.tmuxTarget) return { alive: false, status: 'lost', reason: 'no tmux session recorded' };
  const target = checkTarget(session.tmuxTarget);
  const pane = await paneStateSure(options, target);
  // Asked before every delivery: one tmux call when the pane is there. Otherwise tmux itself
  // missing is not the session being gone — that is a clear error (check), not a verdict.
  if (pane.state !== 'alive') await check();
  if (pane.state === 'unknown') {
    throw new LoopError('internal', `cannot tell whether tmux session ${target} is there: ${pane.error}`);
  }
  const ended = session.engineSessionId
    ? await sessionEnd(options, session.slug, session.engineSessionId)
    : undefined;
  const byEngine = ended !== undefined && endedByEngine(ended);
  if (pane.state === 'alive' && !byEngine) return { alive: true };
  if (pane.state === 'dead') await options.tmux.killSession(target);
  if (byEngine) {
    // `/clear` or `/resume` typed in the TUI: it goes on with another conversation, not ours.
    return { alive: false, status: 'ended', reason: `the engine ended its session (${ended})` };
  }
  return {
    alive: false,
    status: 'lost',
    reason: `tmux session ${target} is gone (killed by hand, or its tmux server stopped)`,
  };
}

/** The reason of our engine's SessionEnd since the last turn, if it sent one. */
async function sessionEnd(
  options: TmuxRunnerOptions,
  slug: string,
  sessionId: string,
): Promise<string | undefined> {
  const dir = stateDir(options, slug);
  if (!existsSync(join(dir, 'hooks.jsonl'))) return undefined;
  const hooks = new HookEventsTail(join(dir, 'hooks.jsonl'), {
    offset: loadState(dir).hookOffset,
    logger: options.logger,
  });
  try {
    const events = await hooks.drain();
    const end = events.find((e) => e.event === 'SessionEnd' && e.sessionId === sessionId);
    return end && end.event === 'SessionEnd' ? (end.reason ?? 'no reason given') : undefined;
  } finally {
    hooks.close();
  }
}
