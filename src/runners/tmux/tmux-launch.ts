import { randomUUID } from 'node:crypto';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LoopError } from '../../core/errors.js';
import { buildInteractiveArgv } from '../../engines/args.js';
import { claudeHookSettings, writeSettingsFile } from '../../engines/claude-hooks.js';
import { answerFirstRun } from '../../engines/first-run.js';
import { whichBinary } from '../../engines/which.js';
import { type RunOutcome, SHUTDOWN } from '../runner.js';
import type { NextResult } from './hook-events-tail.js';
import { watchPane } from './tmux-follow.js';
import {
  endedByEngine,
  saveState,
  sleep,
  type TmuxRunnerOptions,
  type TurnContext,
  tuiOutcome,
} from './tmux-session-state.js';
import { readTranscriptOnce } from './tmux-transcript.js';

/**
 * A TUI started under another guard than this turn's (no sandbox, no gateway, another permission
 * mode — before an upgrade or a config change) keeps its own: it holds what it was given then. It
 * is ended rather than trusted; the session is lost and the next delivery starts a new one.
 */
async function retire(options: TmuxRunnerOptions, ctx: TurnContext): Promise<RunOutcome> {
  await options.tmux.killSession(ctx.target);
  const reason =
    'its TUI was started under another guard (sandbox, gateway or permission mode) than the config now asks for';
  options.logger.warn('ended a TUI started under another guard', { target: ctx.target });
  return tuiOutcome({
    ok: false,
    endReason: 'error',
    error: `${reason}: it was ended and nothing was pasted; the next delivery starts a new session`,
    sessionGone: { status: 'lost', reason },
  });
}

/**
 * How getting the TUI ready for a turn went, as a value: `ok`; or a failed turn to record (`outcome`:
 * the engine exited or never got ready, a TUI under another guard was ended, the engine ended its
 * session, the daemon is stopping); or nothing was started and the caller is told why (`error`).
 */
export type Launch = { ok: true } | { ok: false; outcome: RunOutcome } | { ok: false; error: LoopError };

const READY: Launch = { ok: true };
const failed = (outcome: RunOutcome): Launch => ({ ok: false, outcome });
const refused = (error: LoopError) => ({ ok: false as const, error });

/**
 * The session's TUI, ready for this turn: started when there is none, ended when it runs under
 * another guard; then caught up with what happened in it since our last turn.
 */
export async function readyForTurn(options: TmuxRunnerOptions, ctx: TurnContext): Promise<Launch> {
  if (!(await options.tmux.hasSession(ctx.target))) {
    const started = await spawn(options, ctx);
    if (!started.ok) return started;
  } else if ((ctx.state.launchKey ?? null) !== (ctx.input.launchKey ?? null)) {
    return failed(await retire(options, ctx));
  } else {
    // A TUI an earlier daemon started (maybe before agent windows kept their size): fix it.
    await keepWindowSize(options, ctx.target, true);
  }
  return ctx.hooks ? await catchUp(options, ctx) : READY;
}

/**
 * What happened since our last turn (a person typing in the TUI) is not this turn's start: its hook
 * events are skipped, and its transcript records are counted now, markers ignored. An engine that
 * ended its session meanwhile is not pasted into.
 */
async function catchUp(options: TmuxRunnerOptions, ctx: TurnContext): Promise<Launch> {
  const hooks = ctx.hooks as NonNullable<TurnContext['hooks']>;
  const since = await hooks.drain();
  const ended = since.find((e) => e.event === 'SessionEnd' && e.sessionId === ctx.sessionId);
  if (ended?.event === 'SessionEnd' && endedByEngine(ended.reason)) {
    const reason = `the engine ended its session (${ended.reason})`;
    return failed(
      tuiOutcome({
        ok: false,
        endReason: 'error',
        error: `${reason} before this turn; nothing was pasted`,
        sessionGone: { status: 'ended', reason },
      }),
    );
  }
  await readTranscriptOnce(options, ctx);
  ctx.turnEnded = false;
  return READY;
}

/**
 * Start the TUI and wait until it reports ready (SessionStart with our session id). The pane is
 * kept after an early exit (`remain-on-exit` until ready) so the failure can be shown.
 */
async function spawn(options: TmuxRunnerOptions, ctx: TurnContext): Promise<Launch> {
  const command = engineCommand(options, ctx);
  if (!command.ok) return command;
  const started = await startSession(options, ctx, command.argv, command.sandboxed);
  if (!started.ok) return started;
  if (!ctx.hooks) return READY;
  return await awaitReady(options, ctx, started.envFile);
}

/** The engine's command line (wrapped in the sandbox if there is one), with its hook settings written. */
function engineCommand(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
): { ok: true; argv: string[]; sandboxed: boolean } | { ok: false; error: LoopError } {
  const { input, target, dir } = ctx;
  const { preset } = input;
  const binary = whichBinary(preset.binary, input.env.PATH, input.cwd);
  if (!binary) return refused(new LoopError('binary-missing', `engine binary not found: ${preset.binary}`));
  const eventsFile = join(dir, 'hooks.jsonl');
  const settingsFile =
    preset.interactive?.hooks === 'claude-settings'
      ? writeSettingsFile(
          dir,
          claudeHookSettings({
            node: process.execPath,
            hookScript: options.hookScript,
            eventsFile,
            preToolUse: input.preToolHook,
          }),
        )
      : undefined;
  if (preset.interactive?.firstRun) {
    const note = answerFirstRun(preset.interactive.firstRun, input.env, input.cwd);
    if (note) options.logger.info('pre-answered first-run dialogs', { target, note });
  }
  const engineArgv = [binary, ...buildInteractiveArgv(preset, ctx.sessionId, settingsFile)];
  // The sandbox wraps the engine on the pane's terminal (the launcher outside it reads the env file).
  const wrap = input.sandbox?.({ terminal: true });
  const command = wrap ? [wrap.file, ...wrap.args, ...engineArgv] : engineArgv;
  // tmux reads an argument that ends in `;` as the end of a command: none of ours may.
  const split = command.find((a) => a.endsWith(';'));
  if (split !== undefined) {
    return refused(
      new LoopError('config-invalid', `cannot start the engine in tmux: an argument ends in ";" (${split})`, {
        hint: 'Rename the path or argument so it does not end in a semicolon.',
      }),
    );
  }
  return { ok: true, argv: command, sandboxed: wrap !== undefined };
}

/** Create the detached tmux session running the launcher; returns the env file it was given. */
async function startSession(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  command: string[],
  sandboxed: boolean,
): Promise<{ ok: true; envFile: string } | { ok: false; error: LoopError }> {
  const { input, target, dir, hooks } = ctx;
  // The environment travels in a 0600 file the launcher deletes: never argv, never typed.
  const envFile = join(dir, `env-${randomUUID()}.json`);
  writeFileSync(envFile, JSON.stringify({ ...input.env, TERM: 'xterm-256color' }), { mode: 0o600 });
  const pane = `=${target}:`;
  const created = await options.tmux.run([
    'new-session',
    '-d',
    '-s',
    target,
    '-c',
    input.cwd,
    '-x',
    String(options.width),
    '-y',
    String(options.height),
    '--',
    process.execPath,
    options.launcher,
    envFile,
    ...(sandboxed ? ['--sandboxed'] : []),
    ...command,
    // Same tmux command, so no client can attach before it applies: the window keeps its -x/-y size
    // whatever size a client attaching has; only the console's writer resizes it.
    ';',
    ...fixedWindowSize(pane, options),
    // Same tmux command, so it applies before the program can exit: keep its last screen.
    ...(hooks ? [';', 'set-option', '-w', '-t', pane, 'remain-on-exit', 'on'] : []),
  ]);
  if (!created.ok) {
    rmSync(envFile, { force: true });
    return refused(
      new LoopError(
        'internal',
        `tmux could not start ${target}: ${created.stderr.trim() || `exit ${created.code}`}`,
      ),
    );
  }
  options.logger.info('tmux session started', { target });
  ctx.state.launchKey = input.launchKey;
  saveState(dir, ctx.state);
  return { ok: true, envFile };
}

/**
 * The tmux commands that fix a window's size: `window-size manual` (clients attaching, with any
 * size, never resize it), then the size itself — tmux 3.3a's default (`latest`) may already have
 * given a new window the size of a client attached to another session of the server.
 */
function fixedWindowSize(pane: string, size?: { width: number; height: number }): string[] {
  const manual = ['set-option', '-w', '-t', pane, 'window-size', 'manual'];
  if (!size) return manual;
  return [...manual, ';', 'resize-window', '-t', pane, '-x', String(size.width), '-y', String(size.height)];
}

/**
 * Fix the size of a TUI's window this daemon did not start (adopted after a restart, or started by
 * an earlier version): between turns back to the configured size (`resize`: no one types in it then,
 * a take over holds the turns); during an adopted turn, as it is. Best effort: a failure is logged.
 */
export async function keepWindowSize(
  options: Pick<TmuxRunnerOptions, 'tmux' | 'logger' | 'width' | 'height'>,
  target: string,
  resize: boolean,
): Promise<void> {
  const set = await options.tmux.run(fixedWindowSize(`=${target}:`, resize ? options : undefined));
  if (!set.ok) {
    options.logger.warn('could not fix the size of a TUI window (window-size manual)', {
      target,
      error: set.stderr.trim() || `exit ${set.code}`,
    });
  }
}

/** Wait for the engine's SessionStart while its pane is watched; a failed start is reported. */
async function awaitReady(options: TmuxRunnerOptions, ctx: TurnContext, envFile: string): Promise<Launch> {
  const { input, target } = ctx;
  const hooks = ctx.hooks as NonNullable<TurnContext['hooks']>;
  const died = new AbortController();
  const watching = watchPane(options, target, died.signal, () => died.abort());
  const signals = input.signal ? [died.signal, input.signal] : [died.signal];
  let ready: NextResult;
  let exited: boolean;
  try {
    ready = await hooks.next(
      { event: 'SessionStart', sessionId: ctx.sessionId },
      { timeoutMs: options.readyMs, signal: AbortSignal.any(signals) },
    );
  } finally {
    exited = died.signal.aborted;
    died.abort();
    await watching;
    if (existsSync(envFile)) rmSync(envFile, { force: true });
  }
  if (ready.ok) {
    await options.tmux.run(['set-option', '-w', '-u', '-t', `=${target}:`, 'remain-on-exit']);
    return READY;
  }
  if (!exited && ready.reason === 'aborted' && input.signal?.reason === SHUTDOWN) {
    // The daemon is stopping while the TUI starts: leave it; the delivery runs again on the next
    // start and finds it (and keeps remain-on-exit until then: a failed start stays visible).
    return failed(tuiOutcome({ ok: false, endReason: 'cancel', error: null, detached: true }));
  }
  return failed(await failedStart(options, ctx, ready.reason === 'aborted', exited));
}

/** The engine exited or never got ready: its last screen is kept in the error, its session ended. */
async function failedStart(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  aborted: boolean,
  exited: boolean,
): Promise<RunOutcome> {
  const { input, target } = ctx;
  const { preset } = input;
  const { tmux } = options;
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
    : aborted
      ? `${preset.binary} was stopped before it was ready`
      : `${preset.binary} did not report ready within ${Math.round(options.readyMs / 1000)} s`;
  return tuiOutcome({
    ok: false,
    endReason: aborted && !exited ? 'cancel' : 'error',
    exitCode: state?.state === 'dead' ? state.status : null,
    error: `${why} in ${target}. Last screen: ${last}${exited ? '' : " — first-run dialogs must be answered in the engine's config dir (see docs/engines.md)"}`,
    stoppedBy: exited ? 'exit' : 'SIGKILL',
    sessionGone: { status: 'lost', reason: `${why} in ${target}` },
  });
}
