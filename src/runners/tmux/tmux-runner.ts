import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, isAbsolute, join } from 'node:path';
import { setTimeout as wait } from 'node:timers/promises';
import { LoopError } from '../../core/errors.js';
import { buildInteractiveArgv } from '../../engines/args.js';
import { answerFirstRun } from '../../engines/first-run.js';
import { capabilitiesOf, type EnginePreset } from '../../engines/preset.js';
import type { TurnEvent } from '../../engines/protocols/types.js';
import {
  readTranscriptFrom,
  type TranscriptMarker,
  type TranscriptState,
} from '../../engines/transcripts/claude-transcript.js';
import { whichBinary } from '../../engines/which.js';
import { sanitizeUntrusted } from '../../github/prompt.js';
import type { Logger } from '../../log/logger.js';
import type { Meter } from '../../sessions/types.js';
import { type Runner, type RunOutcome, type RunTurnInput, type SessionProbe, SHUTDOWN } from '../runner.js';
import type { HookEvent } from './claude-hook-events.js';
import { claudeHookSettings, HookEventsTail, type NextResult, writeSettingsFile } from './claude-hooks.js';
import { checkBuffer, checkTarget, type PaneState, type Tmux } from './tmux.js';

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

interface TranscriptPosition {
  path: string;
  state: TranscriptState;
}

/** The turn in flight, saved in the session's state.json: what a restarted daemon needs to adopt it. */
interface TurnMark {
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

interface SessionState {
  hookOffset: number;
  transcript?: TranscriptPosition | undefined;
  turn?: TurnMark | undefined;
  /** What guards the TUI (sandbox, gateway, permission mode) as it was started: it keeps it. */
  launchKey?: string | undefined;
}

/** Everything one turn (run or adopted) works with. */
interface TurnContext {
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

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** Sleep that ends early (without throwing) when the signal aborts. */
const pause = (ms: number, signal: AbortSignal) =>
  wait(ms, undefined, { signal }).catch(() => undefined) as Promise<void>;
/** How long the TUI may take to acknowledge a submitted prompt (UserPromptSubmit) before Enter is retried once. */
const ACCEPT_MS = 5000;
/** How long after Stop the transcript may take to receive the turn's last records. */
const TRANSCRIPT_GRACE_MS = 5000;
/** How often a running turn checks that its tmux session is still there. */
const PROBE_MS = 1000;
/** How often a running turn reads new transcript records (live events, interrupts). */
const TRANSCRIPT_POLL_MS = 250;
const END_EVENTS = ['Stop', 'StopFailure', 'SessionEnd'] as const;

/**
 * The `tmux` runner: the engine's interactive TUI in a detached tmux session `loop-<slug>` that
 * people can attach to. Turns are delivered by bracketed paste from a private file; they end on the
 * engine's own hooks (Claude Code's Stop / StopFailure), never on what the screen shows; usage and
 * tool events come from the engine's transcript file, read while the turn runs. Secrets reach the
 * engine only through a 0600 environment file that the launcher deletes before it starts the engine.
 *
 * The turn in flight is saved in `<stateRoot>/<slug>/state.json` (offsets where it began, and
 * whether the engine confirmed the prompt): a daemon that stops or dies mid-turn leaves the TUI
 * running, and the next one adopts the turn and follows it to its Stop instead of pasting it again.
 */
export class TmuxRunner implements Runner {
  readonly name = 'tmux';

  constructor(private readonly options: TmuxRunnerOptions) {}

  async check(): Promise<void> {
    const version = await this.options.tmux.version();
    if (!version) {
      throw new LoopError('binary-missing', 'tmux is not installed (the tmux runner needs it)', {
        hint: 'Install tmux 3.2 or newer: `apt-get install tmux` (Debian/Ubuntu), `brew install tmux` (macOS), `dnf install tmux` (Fedora).',
      });
    }
    if (version.major < 3 || (version.major === 3 && version.minor < 2)) {
      throw new LoopError(
        'binary-missing',
        `${version.text} is too old for the tmux runner (3.2 or newer needed)`,
        {
          hint: 'Upgrade tmux, or use the process runner.',
        },
      );
    }
  }

  supports(preset: EnginePreset, engine: string): void {
    if (!capabilitiesOf(preset).tmux) {
      throw new LoopError('engine-unsupported', `the ${engine} engine cannot run in tmux`, {
        hint: 'Its preset declares no interactive mode with a pre-assigned session id ({sessionId} in interactive.args, sessionId: assign). Use --runner process.',
      });
    }
  }

  /** A TUI's usage comes from its transcript (per request), or from nothing. */
  meterFor(preset: EnginePreset): Meter {
    return preset.interactive?.transcript === 'claude-jsonl' ? 'transcript' : 'none';
  }

  targetFor(slug: string): string {
    return checkTarget(`loop-${slug}`);
  }

  private stateDir(slug: string): string {
    if (!/^[a-z0-9-]+$/.test(slug)) throw new LoopError('internal', `unsafe slug ${JSON.stringify(slug)}`);
    return join(this.options.stateRoot, slug);
  }

  private loadState(dir: string): SessionState {
    try {
      const parsed = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as SessionState;
      return Number.isSafeInteger(parsed.hookOffset) && parsed.hookOffset >= 0 ? parsed : { hookOffset: 0 };
    } catch {
      return { hookOffset: 0 };
    }
  }

  /** Written mid-turn and read after a crash: replaced atomically, never left half-written. */
  private saveState(dir: string, state: SessionState): void {
    const file = join(dir, 'state.json');
    const temp = `${file}.${process.pid}.tmp`;
    writeFileSync(temp, JSON.stringify(state), { mode: 0o600 });
    renameSync(temp, file);
  }

  private open(input: RunTurnInput, from: 'last-turn' | 'turn-start'): TurnContext {
    const { preset, session } = input;
    const interactive = preset.interactive;
    if (!interactive || !session.tmuxTarget || !input.engineSessionId) {
      throw new LoopError(
        'engine-unsupported',
        'this session cannot run in tmux (no interactive mode, target or session id)',
      );
    }
    const target = checkTarget(session.tmuxTarget);
    const dir = this.stateDir(session.slug);
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const state = this.loadState(dir);
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
        logger: this.options.logger,
        onEvent: (event) => this.onHookEvent(ctx, event),
      });
    }
    return ctx;
  }

  /** Every hook event read: another session's is reported and ignored; ours may name the transcript. */
  private onHookEvent(ctx: TurnContext, event: HookEvent): void {
    if (event.sessionId !== undefined && event.sessionId !== ctx.sessionId) {
      this.options.logger.warn('ignored a hook event of another session', {
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
      this.options.logger.warn('ignored an unexpected transcript path in a hook event', {
        target: ctx.target,
        event: event.event,
      });
      return;
    }
    ctx.state.transcript = { path, state: { offset: 0, seenMessageIds: [] } };
  }

  /** Let go of a turn: offsets saved; the turn mark kept only when the turn goes on without us. */
  private release(ctx: TurnContext, keepTurn: boolean): void {
    if (ctx.hooks) {
      if (!keepTurn) ctx.state.hookOffset = Math.max(ctx.state.hookOffset, ctx.hooks.offset);
      ctx.hooks.close();
    }
    if (!keepTurn) ctx.state.turn = undefined;
    try {
      this.saveState(ctx.dir, ctx.state);
    } catch {
      // The state dir vanished (session closed under us): nothing to keep.
    }
  }

  async runTurn(input: RunTurnInput): Promise<RunOutcome> {
    const ctx = this.open(input, 'last-turn');
    const { state, hooks, target } = ctx;
    const interactive = input.preset.interactive as NonNullable<EnginePreset['interactive']>;
    let keepTurn = false;
    try {
      if (!(await this.options.tmux.hasSession(target))) {
        const failed = await this.spawn(ctx);
        if (failed) return failed;
      } else if ((state.launchKey ?? null) !== (input.launchKey ?? null)) {
        return await this.retire(ctx);
      }
      if (hooks) {
        // What happened since our last turn (a person typing in the TUI) is not this turn's start:
        // its hook events are skipped, and its transcript records are counted now, markers ignored.
        const since = await hooks.drain();
        const ended = since.find((e) => e.event === 'SessionEnd' && e.sessionId === ctx.sessionId);
        if (ended?.event === 'SessionEnd' && endedByEngine(ended.reason)) {
          const reason = `the engine ended its session (${ended.reason})`;
          return tuiOutcome({
            ok: false,
            endReason: 'error',
            error: `${reason} before this turn; nothing was pasted`,
            sessionGone: { status: 'ended', reason },
          });
        }
        await this.readTranscriptOnce(ctx);
        ctx.turnEnded = false;
      }
      state.turn = {
        id: input.turnId ?? 0,
        phase: 'delivering',
        hookOffset: hooks?.offset ?? state.hookOffset,
        transcript: state.transcript && structuredClone(state.transcript),
      };
      this.saveState(ctx.dir, state);
      await this.deliver(ctx, interactive.submitDelayMs);
      if (!hooks) {
        // Nothing tells us when this engine's turn ends: say so, and do not pretend to measure it.
        return tuiOutcome({ ok: true, endReason: 'untracked', error: null });
      }
      state.turn.phase = 'submitted';
      this.saveState(ctx.dir, state);
      const outcome = await this.follow(ctx, Date.now() + input.backstopMs);
      keepTurn = outcome.detached === true;
      return outcome;
    } finally {
      this.release(ctx, keepTurn);
    }
  }

  /**
   * A TUI started under another guard than this turn's (no sandbox, no gateway, another permission
   * mode — before an upgrade or a config change) keeps its own: it holds what it was given then. It
   * is ended rather than trusted; the session is lost and the next delivery starts a new one.
   */
  private async retire(ctx: TurnContext): Promise<RunOutcome> {
    await this.options.tmux.killSession(ctx.target);
    const reason =
      'its TUI was started under another guard (sandbox, gateway or permission mode) than the config now asks for';
    this.options.logger.warn('ended a TUI started under another guard', { target: ctx.target });
    return tuiOutcome({
      ok: false,
      endReason: 'error',
      error: `${reason}: it was ended and nothing was pasted; the next delivery starts a new session`,
      sessionGone: { status: 'lost', reason },
    });
  }

  async adoptTurn(
    input: RunTurnInput & { turnId: number },
  ): Promise<RunOutcome | { adopted: false; reason: string }> {
    const ctx = this.open(input, 'turn-start');
    const { state, hooks, target } = ctx;
    const mark = state.turn;
    let keepTurn = false;
    try {
      if (!hooks) return { adopted: false, reason: 'the engine reports no turn ends (no hooks) to follow' };
      if (!mark || mark.id !== input.turnId) {
        return { adopted: false, reason: 'the turn was not delivered yet when its daemon stopped' };
      }
      const pane = await this.paneStateSure(target);
      if (pane.state !== 'alive') return { adopted: false, reason: `tmux session ${target} is gone` };
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
          await this.options.tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys Enter');
          accepted = await hooks.next({ event: 'UserPromptSubmit', sessionId }, { timeoutMs: ACCEPT_MS });
        }
        if (!accepted.ok) {
          return {
            adopted: false,
            reason: `the prompt was pasted into ${target} but the engine never accepted it`,
          };
        }
        mark.phase = 'submitted';
        this.saveState(ctx.dir, state);
      }
      input.onAdopt?.();
      this.options.logger.info('adopted a running tmux turn', { target, turn: input.turnId });
      const outcome = await this.follow(ctx, Date.now() + input.backstopMs);
      keepTurn = outcome.detached === true;
      return outcome;
    } finally {
      this.release(ctx, keepTurn || (mark !== undefined && mark.id === input.turnId && !hooks));
    }
  }

  async probe(session: {
    slug: string;
    tmuxTarget: string | null;
    engineSessionId?: string | null;
  }): Promise<SessionProbe> {
    if (!session.tmuxTarget) return { alive: false, status: 'lost', reason: 'no tmux session recorded' };
    const target = checkTarget(session.tmuxTarget);
    const pane = await this.paneStateSure(target);
    // Asked before every delivery: one tmux call when the pane is there. Otherwise tmux itself
    // missing is not the session being gone — that is a clear error (check), not a verdict.
    if (pane.state !== 'alive') await this.check();
    if (pane.state === 'unknown') {
      throw new LoopError('internal', `cannot tell whether tmux session ${target} is there: ${pane.error}`);
    }
    const ended = session.engineSessionId
      ? await this.sessionEnd(session.slug, session.engineSessionId)
      : undefined;
    const byEngine = ended !== undefined && endedByEngine(ended);
    if (pane.state === 'alive' && !byEngine) return { alive: true };
    if (pane.state === 'dead') await this.options.tmux.killSession(target);
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

  /** The pane's state, asked again (up to 3 times) while tmux cannot say. */
  private async paneStateSure(target: string): Promise<PaneState> {
    let pane = await this.options.tmux.paneState(target);
    for (let i = 0; i < 2 && pane.state === 'unknown'; i++) {
      await sleep(200);
      pane = await this.options.tmux.paneState(target);
    }
    return pane;
  }

  /** The reason of our engine's SessionEnd since the last turn, if it sent one. */
  private async sessionEnd(slug: string, sessionId: string): Promise<string | undefined> {
    const dir = this.stateDir(slug);
    if (!existsSync(join(dir, 'hooks.jsonl'))) return undefined;
    const hooks = new HookEventsTail(join(dir, 'hooks.jsonl'), {
      offset: this.loadState(dir).hookOffset,
      logger: this.options.logger,
    });
    try {
      const events = await hooks.drain();
      const end = events.find((e) => e.event === 'SessionEnd' && e.sessionId === sessionId);
      return end && end.event === 'SessionEnd' ? (end.reason ?? 'no reason given') : undefined;
    } finally {
      hooks.close();
    }
  }

  /**
   * Start the TUI and wait until it reports ready (SessionStart with our session id). The pane is
   * kept after an early exit (`remain-on-exit` until ready) so the failure can be shown. Returns a
   * failed outcome (the session is then lost) when the engine exits or never gets ready.
   */
  private async spawn(ctx: TurnContext): Promise<RunOutcome | undefined> {
    const { input, target, dir, hooks } = ctx;
    const { preset } = input;
    const { tmux } = this.options;
    const binary = whichBinary(preset.binary, input.env.PATH, input.cwd);
    if (!binary) throw new LoopError('binary-missing', `engine binary not found: ${preset.binary}`);
    const eventsFile = join(dir, 'hooks.jsonl');
    const settingsFile =
      preset.interactive?.hooks === 'claude-settings'
        ? writeSettingsFile(
            dir,
            claudeHookSettings({
              node: process.execPath,
              hookScript: this.options.hookScript,
              eventsFile,
              preToolUse: input.preToolHook,
            }),
          )
        : undefined;
    if (preset.interactive?.firstRun) {
      const note = answerFirstRun(preset.interactive.firstRun, input.env, input.cwd);
      if (note) this.options.logger.info('pre-answered first-run dialogs', { target, note });
    }
    const engineArgv = [binary, ...buildInteractiveArgv(preset, ctx.sessionId, settingsFile)];
    // The sandbox wraps the engine on the pane's terminal (the launcher outside it reads the env file).
    const wrap = input.sandbox?.({ terminal: true });
    const command = wrap ? [wrap.file, ...wrap.args, ...engineArgv] : engineArgv;
    // tmux reads an argument that ends in `;` as the end of a command: none of ours may.
    const split = command.find((a) => a.endsWith(';'));
    if (split !== undefined) {
      throw new LoopError(
        'config-invalid',
        `cannot start the engine in tmux: an argument ends in ";" (${split})`,
        {
          hint: 'Rename the path or argument so it does not end in a semicolon.',
        },
      );
    }
    // The environment travels in a 0600 file the launcher deletes: never argv, never typed.
    const envFile = join(dir, `env-${randomUUID()}.json`);
    writeFileSync(envFile, JSON.stringify({ ...input.env, TERM: 'xterm-256color' }), { mode: 0o600 });
    const pane = `=${target}:`;
    const created = await tmux.run([
      'new-session',
      '-d',
      '-s',
      target,
      '-c',
      input.cwd,
      '-x',
      String(this.options.width),
      '-y',
      String(this.options.height),
      '--',
      process.execPath,
      this.options.launcher,
      envFile,
      ...(wrap ? ['--sandboxed'] : []),
      ...command,
      // Same tmux command, so it applies before the program can exit: keep its last screen.
      ...(hooks ? [';', 'set-option', '-w', '-t', pane, 'remain-on-exit', 'on'] : []),
    ]);
    if (!created.ok) {
      rmSync(envFile, { force: true });
      throw new LoopError(
        'internal',
        `tmux could not start ${target}: ${created.stderr.trim() || `exit ${created.code}`}`,
      );
    }
    this.options.logger.info('tmux session started', { target });
    ctx.state.launchKey = input.launchKey;
    this.saveState(dir, ctx.state);
    if (!hooks) return undefined;
    const died = new AbortController();
    const watching = this.watchPane(target, died.signal, () => died.abort());
    const signals = input.signal ? [died.signal, input.signal] : [died.signal];
    let ready: NextResult;
    let exited: boolean;
    try {
      ready = await hooks.next(
        { event: 'SessionStart', sessionId: ctx.sessionId },
        { timeoutMs: this.options.readyMs, signal: AbortSignal.any(signals) },
      );
    } finally {
      exited = died.signal.aborted;
      died.abort();
      await watching;
      if (existsSync(envFile)) rmSync(envFile, { force: true });
    }
    if (ready.ok) {
      await tmux.run(['set-option', '-w', '-u', '-t', pane, 'remain-on-exit']);
      return undefined;
    }
    if (!exited && ready.reason === 'aborted' && input.signal?.reason === SHUTDOWN) {
      // The daemon is stopping while the TUI starts: leave it; the delivery runs again on the next
      // start and finds it (and keeps remain-on-exit until then: a failed start stays visible).
      return tuiOutcome({ ok: false, endReason: 'cancel', error: null, detached: true });
    }
    let state = exited ? await tmux.paneState(target) : undefined;
    // tmux may mark the pane dead before it has the exit status (and sometimes never gets it).
    for (let i = 0; i < 10 && state?.state === 'dead' && state.status === null; i++) {
      await sleep(100);
      state = await tmux.paneState(target);
    }
    // With history: tmux scrolls a dead pane's output up to print its "Pane is dead" line.
    const screen = await tmux.capturePane(target, { history: true }).catch(() => '');
    await tmux.killSession(target);
    // The last lines with text, without tmux's own "Pane is dead" line (remain-on-exit).
    // Scrubbed whole before it is cut: a secret on screen is neither stored nor cut in half.
    const scrubbed = input.scrub ? input.scrub(screen) : screen;
    const lines = scrubbed.split('\n').filter((l) => l.trim() !== '' && !/^Pane is dead \(/.test(l));
    const last = lines.slice(-3).join(' | ').slice(0, 300) || '(empty)';
    const why = exited
      ? `${preset.binary} exited${state?.state === 'dead' && state.status !== null ? ` with status ${state.status}` : ''} before it was ready`
      : ready.reason === 'aborted'
        ? `${preset.binary} was stopped before it was ready`
        : `${preset.binary} did not report ready within ${Math.round(this.options.readyMs / 1000)} s`;
    return tuiOutcome({
      ok: false,
      endReason: ready.reason === 'aborted' && !exited ? 'cancel' : 'error',
      exitCode: state?.state === 'dead' ? state.status : null,
      error: `${why} in ${target}. Last screen: ${last}${exited ? '' : " — first-run dialogs must be answered in the engine's config dir (see docs/engines.md)"}`,
      stoppedBy: exited ? 'exit' : 'SIGKILL',
      sessionGone: { status: 'lost', reason: `${why} in ${target}` },
    });
  }

  /** Calls `onGone` (once) when the session's pane is no longer running its program. */
  private async watchPane(target: string, signal: AbortSignal, onGone: () => void): Promise<void> {
    while (!signal.aborted) {
      await pause(PROBE_MS, signal);
      if (signal.aborted) return;
      const pane = await this.options.tmux.paneState(target);
      // `unknown` (tmux slow or failing) is not a verdict: ask again next time.
      if (pane.state === 'gone' || pane.state === 'dead') {
        onGone();
        return;
      }
    }
  }

  /** Reads the transcript while the turn runs: live events, and the interrupt a person may make. */
  private async watchTranscript(
    ctx: TurnContext,
    signal: AbortSignal,
    onInterrupt: () => void,
  ): Promise<void> {
    while (!signal.aborted) {
      const markers = await this.readTranscriptOnce(ctx);
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
  private async follow(ctx: TurnContext, deadline: number): Promise<RunOutcome> {
    const { input, target, sessionId } = ctx;
    const hooks = ctx.hooks as HookEventsTail;
    ctx.following = true;
    const stop = new AbortController();
    let why: 'gone' | 'interrupted' | undefined;
    const halt = (reason: 'gone' | 'interrupted') => {
      why ??= reason;
      stop.abort();
    };
    const failed = (what: string) => (error: unknown) => {
      // A watcher that fails stops watching (reported); the hooks still end the turn.
      this.options.logger.warn(`${what} failed while following a turn`, { target, error });
    };
    const watchers = Promise.all([
      this.watchPane(target, stop.signal, () => halt('gone')).catch(failed('watching the pane')),
      this.watchTranscript(ctx, stop.signal, () => halt('interrupted')).catch(
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
    const endedAt = new Date();
    const base = tuiOutcome({ ok: false, endReason: 'result', error: null, endedAt });
    if (end.ok && end.event.event === 'SessionEnd' && !endedByEngine(end.event.reason)) {
      // Ended from outside (its tmux session or server killed): the same as vanishing.
      why = 'gone';
    } else if (end.ok) {
      const event = end.event;
      await this.readTranscriptToEnd(ctx, event.event === 'Stop' ? TRANSCRIPT_GRACE_MS : 500);
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
    await this.readTranscriptToEnd(ctx, 0);
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
      await this.options.tmux.run(['send-keys', '-t', `=${target}:`, 'Escape']);
      return { ...base, ok: false, endReason: 'cancel', error: 'cancelled' };
    }
    return {
      ...base,
      ok: false,
      endReason: 'backstop',
      error: `no Stop hook before the backstop (defaults.backstopSeconds, counted from the turn's start); the TUI is left running in ${target}`,
    };
  }

  /**
   * Paste the prompt as inert text: sanitized (no ESC, so no bracketed-paste end marker; no control
   * characters but newline and tab), from a 0600 file through a uniquely named tmux buffer, with
   * bracketed paste (-p), then Enter after the engine's submit delay; confirmed by UserPromptSubmit.
   */
  private async deliver(ctx: TurnContext, submitDelayMs: number): Promise<void> {
    const { tmux } = this.options;
    const { target, dir, hooks, sessionId } = ctx;
    const text = sanitizeUntrusted(ctx.input.prompt, 1024 * 1024);
    const file = join(dir, `prompt-${randomUUID()}.txt`);
    const buffer = `the-loop-${randomUUID().slice(0, 8)}`;
    writeFileSync(file, text, { mode: 0o600 });
    try {
      // One tmux process for the three steps (each tmux call costs ~4 ms): leave copy mode if the pane
      // is in it (if-shell -F tests a format, no shell involved; the only text tmux parses there is the
      // validated target), load the buffer from the file, paste it bracketed and delete it.
      const pane = `=${target}:`;
      await tmux.must(
        [
          'if-shell',
          '-F',
          '-t',
          pane,
          '#{pane_in_mode}',
          `send-keys -t ${pane} -X cancel`,
          ';',
          'load-buffer',
          '-b',
          checkBuffer(buffer),
          file,
          ';',
          'paste-buffer',
          '-p',
          '-d',
          '-b',
          buffer,
          '-t',
          pane,
        ],
        'paste',
      );
    } finally {
      rmSync(file, { force: true });
    }
    if (ctx.state.turn) {
      // From here, a restarted daemon presses Enter instead of pasting again.
      ctx.state.turn.phase = 'pasted';
      this.saveState(dir, ctx.state);
    }
    // Claude Code drops an Enter sent right after a paste (observed: swallowed every time at 0 ms).
    await sleep(submitDelayMs);
    await tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys Enter');
    if (!hooks) return;
    const accepted = await hooks.next({ event: 'UserPromptSubmit', sessionId }, { timeoutMs: ACCEPT_MS });
    if (accepted.ok) return;
    await tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys Enter (retry)');
    const retried = await hooks.next({ event: 'UserPromptSubmit', sessionId }, { timeoutMs: ACCEPT_MS });
    if (!retried.ok)
      throw new LoopError(
        'internal',
        `the prompt was pasted into ${target} but the engine did not accept it (no UserPromptSubmit)`,
      );
  }

  /**
   * Read what the transcript has beyond the saved position; events go to the turn. Claude Code
   * creates the file with the first prompt: until the turn's end, a missing file is not reported.
   */
  private async readTranscriptOnce(ctx: TurnContext, final = false): Promise<TranscriptMarker[]> {
    const position = ctx.state.transcript;
    if (!position || ctx.input.preset.interactive?.transcript !== 'claude-jsonl') return [];
    if (!final && !existsSync(position.path)) return [];
    const read = await readTranscriptFrom(position.path, position.state, {
      maxLineBytes: ctx.input.maxLineBytes,
      scrub: ctx.input.scrub,
    });
    for (const warning of read.warnings) {
      if (ctx.warned.has(warning)) continue;
      ctx.warned.add(warning);
      this.options.logger.warn('transcript', { warning });
    }
    for (const event of read.events) ctx.input.onEvent(event as TurnEvent);
    // The hook may have named another file meanwhile; only our position advances.
    if (ctx.state.transcript === position) position.state = read.state;
    if (read.markers.includes('turnEnd')) ctx.turnEnded = true;
    return read.markers;
  }

  /**
   * Read the turn's last records. Claude Code fires Stop before the TUI has always written the turn's
   * last records (observed with 2.1.197), so reading goes on until the TUI's end-of-turn record
   * (`turn_duration`) arrives, or a short grace period ends.
   */
  private async readTranscriptToEnd(ctx: TurnContext, graceMs: number): Promise<void> {
    const deadline = Date.now() + graceMs;
    for (;;) {
      const last = Date.now() >= deadline;
      await this.readTranscriptOnce(ctx, last);
      if (ctx.turnEnded || last) return;
      await sleep(50);
    }
  }

  async closeSession(session: { slug: string; tmuxTarget: string | null }): Promise<string> {
    if (!session.tmuxTarget) return 'no tmux session';
    const killed = await this.options.tmux.killSession(checkTarget(session.tmuxTarget));
    rmSync(this.stateDir(session.slug), { recursive: true, force: true });
    return killed
      ? `tmux session ${session.tmuxTarget} ended`
      : `tmux session ${session.tmuxTarget} was already gone`;
  }
}

/** How a TUI turn ended: the TUI itself runs on (no exit code, nothing signalled) unless said otherwise. */
function tuiOutcome(
  fields: Pick<RunOutcome, 'ok' | 'endReason' | 'error'> & Partial<RunOutcome>,
): RunOutcome {
  return { endedAt: new Date(), exitCode: null, exitSignal: null, stoppedBy: 'still-running', ...fields };
}

/**
 * Whether a SessionEnd reason means the engine (or a person in it) ended the session. Claude Code
 * reports `other` when it is ended from outside — SIGHUP from a killed tmux session or server.
 */
function endedByEngine(reason: string | undefined): boolean {
  return reason !== undefined && reason !== 'other';
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
