import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { basename, isAbsolute, join } from 'node:path';
import { setTimeout as wait } from 'node:timers/promises';
import { LoopError } from '../../core/errors.js';
import type { TranscriptState } from '../../engines/transcripts/claude-transcript.js';
import type { Logger } from '../../log/logger.js';
import type { RunOutcome, RunTurnInput } from '../runner.js';
import type { HookEvent } from './claude-hook-events.js';
import { HookEventsTail } from './hook-events-tail.js';
import { checkTarget, type PaneState, type Tmux } from './tmux.js';

export interface TmuxRunnerOptions {
  tmux: Tmux;
  /** `<dataDir>/sessions`: one private directory per session (hooks, settings, offsets). */
  stateRoot: string;
  /** Absolute paths of our small programs (bin/the-loop-hook.js, bin/the-loop-launch.js). */
  hookScript: string;
  launcher: string;
  width: number;
  height: number;
  readyMs: number;
  logger: Logger;
}

export interface TranscriptPosition {
  path: string;
  state: TranscriptState;
}

/** The turn in flight, saved in the session's state.json: what a restarted daemon needs to adopt it. */
export interface TurnMark {
  /** The registry's turn id. */
  id: number;
  /**
   * `delivering`: the paste may have started; `pasted`: the text is in the input box, Enter may not
   * have been taken yet; `submitted`: the engine confirmed it (UserPromptSubmit).
   */
  phase: 'delivering' | 'pasted' | 'submitted';
  /** Hook events offset when the turn began: an adopted turn reads its hooks again from here. */
  hookOffset: number;
  /** Transcript position when the turn began: an adopted turn reads its records again from here. */
  transcript?: TranscriptPosition | undefined;
}

export interface SessionState {
  hookOffset: number;
  transcript?: TranscriptPosition | undefined;
  turn?: TurnMark | undefined;
  /** What guards the TUI (sandbox, gateway, permission mode) as it was started: it keeps it. */
  launchKey?: string | undefined;
}

/** Everything one turn (run or adopted) works with. */
export interface TurnContext {
  input: RunTurnInput;
  target: string;
  dir: string;
  state: SessionState;
  hooks: HookEventsTail | undefined;
  sessionId: string;
  /** The transcript's end-of-turn record was read. */
  turnEnded: boolean;
  /** Transcript warnings already logged this turn (a missing file is reported once, not every poll). */
  warned: Set<string>;
  /** The turn is being followed (hook events now belong to it; earlier ones were drained). */
  following?: boolean;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Sleep that ends early (without throwing) when the signal aborts. */
export const pause = (ms: number, signal: AbortSignal) =>
  wait(ms, undefined, { signal }).catch(() => undefined) as Promise<void>;
/** How long the TUI may take to acknowledge a submitted prompt (UserPromptSubmit) before Enter is retried once. */
export const ACCEPT_MS = 5000;

export function stateDir(options: TmuxRunnerOptions, slug: string): string {
  if (!/^[a-z0-9-]+$/.test(slug)) throw new LoopError('internal', `unsafe slug ${JSON.stringify(slug)}`);
  return join(options.stateRoot, slug);
}

export function loadState(dir: string): SessionState {
  try {
    const parsed = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as SessionState;
    return Number.isSafeInteger(parsed.hookOffset) && parsed.hookOffset >= 0 ? parsed : { hookOffset: 0 };
  } catch {
    return { hookOffset: 0 };
  }
}

/** Written mid-turn and read after a crash: replaced atomically, never left half-written. */
export function saveState(dir: string, state: SessionState): void {
  const file = join(dir, 'state.json');
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, JSON.stringify(state), { mode: 0o600 });
  renameSync(temp, file);
}

export function openTurn(
  options: TmuxRunnerOptions,
  input: RunTurnInput,
  from: 'last-turn' | 'turn-start',
): TurnContext {
  const { preset, session } = input;
  const interactive = preset.interactive;
  if (!interactive || !session.tmuxTarget || !input.engineSessionId) {
    throw new LoopError(
      'engine-unsupported',
      'this session cannot run in tmux (no interactive mode, target or session id)',
    );
  }
  const target = checkTarget(session.tmuxTarget);
  const dir = stateDir(options, session.slug);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const state = loadState(dir);
  const sessionId = input.engineSessionId;
  const ctx: TurnContext = {
    input,
    target,
    dir,
    state,
    hooks: undefined,
    sessionId,
    turnEnded: false,
    warned: new Set(),
  };
  if (interactive.hooks === 'claude-settings') {
    const offset = from === 'turn-start' ? (state.turn?.hookOffset ?? state.hookOffset) : state.hookOffset;
    ctx.hooks = new HookEventsTail(join(dir, 'hooks.jsonl'), {
      offset,
      logger: options.logger,
      onEvent: (event) => onHookEvent(options, ctx, event),
    });
  }
  return ctx;
}

/** Every hook event read: another session's is reported and ignored; ours may name the transcript. */
function onHookEvent(options: TmuxRunnerOptions, ctx: TurnContext, event: HookEvent): void {
  if (event.sessionId !== undefined && event.sessionId !== ctx.sessionId) {
    options.logger.warn('ignored a hook event of another session', {
      target: ctx.target,
      event: event.event,
    });
    return;
  }
  if (ctx.following && event.event === 'other' && event.name === 'Notification') {
    // Claude Code's Notification hook says when its permission prompt is up: nobody is answering it.
    const type = event.payload?.notification_type;
    const message = event.payload?.message;
    if (type === 'permission_prompt') {
      ctx.input.onEvent({
        type: 'attention',
        waiting: true,
        message: typeof message === 'string' ? message.slice(0, 500) : undefined,
      });
    }
  }
  const path = event.transcriptPath;
  if (path === undefined || ctx.state.transcript?.path === path) return;
  // The path goes to open(): only the file Claude Code names after our own session id is read.
  if (!isAbsolute(path) || /[\n\r\0]/.test(path) || basename(path) !== `${ctx.sessionId}.jsonl`) {
    options.logger.warn('ignored an unexpected transcript path in a hook event', {
      target: ctx.target,
      event: event.event,
    });
    return;
  }
  ctx.state.transcript = { path, state: { offset: 0, seenMessageIds: [] } };
}

/** Let go of a turn: offsets saved; the turn mark kept only when the turn goes on without us. */
export function releaseTurn(ctx: TurnContext, keepTurn: boolean): void {
  if (ctx.hooks) {
    if (!keepTurn) ctx.state.hookOffset = Math.max(ctx.state.hookOffset, ctx.hooks.offset);
    ctx.hooks.close();
  }
  if (!keepTurn) ctx.state.turn = undefined;
  try {
    saveState(ctx.dir, ctx.state);
  } catch {
    // The state dir vanished (session closed under us): nothing to keep.
  }
}

/** The pane's state, asked again (up to 3 times) while tmux cannot say. */
export async function paneStateSure(options: TmuxRunnerOptions, target: string): Promise<PaneState> {
  let pane = await options.tmux.paneState(target);
  for (let i = 0; i < 2 && pane.state === 'unknown'; i++) {
    await sleep(200);
    pane = await options.tmux.paneState(target);
  }
  return pane;
}

/** How a TUI turn ended: the TUI itself runs on (no exit code, nothing signalled) unless said otherwise. */
export function tuiOutcome(
  fields: Pick<RunOutcome, 'ok' | 'endReason' | 'error'> & Partial<RunOutcome>,
): RunOutcome {
  return { endedAt: new Date(), exitCode: null, exitSignal: null, stoppedBy: 'still-running', ...fields };
}

/**
 * Whether a SessionEnd reason means the engine (or a person in it) ended the session. Claude Code
 * reports `other` when it is ended from outside — SIGHUP from a killed tmux session or server.
 */
export function endedByEngine(reason: string | undefined): boolean {
  return reason !== undefined && reason !== 'other';
}
