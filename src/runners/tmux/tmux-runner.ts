import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LoopError } from '../../core/errors.js';
import { buildInteractiveArgv } from '../../engines/args.js';
import { capabilitiesOf, type EnginePreset } from '../../engines/preset.js';
import type { TurnEvent } from '../../engines/protocols/types.js';
import { readTranscriptFrom, type TranscriptState } from '../../engines/transcripts/claude-transcript.js';
import { whichBinary } from '../../engines/which.js';
import { sanitizeUntrusted } from '../../github/prompt.js';
import type { Logger } from '../../log/logger.js';
import type { Runner, RunOutcome, RunTurnInput } from '../runner.js';
import { claudeHookSettings, HookEventsTail, writeSettingsFile } from './claude-hooks.js';
import { checkBuffer, checkTarget, type Tmux } from './tmux.js';

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

interface SessionState {
  hookOffset: number;
  transcript?: { path: string; state: TranscriptState } | undefined;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
/** How long the TUI may take to acknowledge a submitted prompt (UserPromptSubmit) before Enter is retried once. */
const ACCEPT_MS = 5000;
/** How long after Stop the transcript may take to receive the turn's last records. */
const TRANSCRIPT_GRACE_MS = 5000;

/**
 * The `tmux` runner: the engine's interactive TUI in a detached tmux session `loop-<slug>` that
 * people can attach to. Turns are delivered by bracketed paste from a private file; they end on the
 * engine's own hooks (Claude Code's Stop / StopFailure), never on what the screen shows; usage and
 * tool events come from the engine's transcript file. Secrets reach the engine only through a 0600
 * environment file that the launcher deletes before it starts the engine.
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

  targetFor(slug: string): string {
    return checkTarget(`loop-${slug}`);
  }

  private stateDir(slug: string): string {
    if (!/^[a-z0-9-]+$/.test(slug)) throw new LoopError('internal', `unsafe slug ${JSON.stringify(slug)}`);
    return join(this.options.stateRoot, slug);
  }

  private loadState(dir: string): SessionState {
    try {
      return JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as SessionState;
    } catch {
      return { hookOffset: 0 };
    }
  }

  private saveState(dir: string, state: SessionState): void {
    writeFileSync(join(dir, 'state.json'), JSON.stringify(state), { mode: 0o600 });
  }

  async runTurn(input: RunTurnInput): Promise<RunOutcome> {
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
    const eventsFile = join(dir, 'hooks.jsonl');
    const state = this.loadState(dir);
    const hooks =
      interactive.hooks === 'claude-settings'
        ? new HookEventsTail(eventsFile, { offset: state.hookOffset })
        : undefined;
    try {
      if (!(await this.options.tmux.hasSession(target))) {
        await this.spawn(input, target, dir, eventsFile, hooks);
      }
      await this.deliver(target, dir, input.prompt, interactive.submitDelayMs, hooks, input.engineSessionId);
      if (!hooks) {
        // Nothing tells us when this engine's turn ends: say so, and do not pretend to measure it.
        return {
          ok: true,
          endReason: 'untracked',
          endedAt: new Date(),
          exitCode: null,
          exitSignal: null,
          error: null,
          stoppedBy: 'still-running',
        };
      }
      const end = await hooks.next(
        { event: ['Stop', 'StopFailure', 'SessionEnd'], sessionId: input.engineSessionId },
        { timeoutMs: input.backstopMs, signal: input.signal },
      );
      state.hookOffset = hooks.offset;
      const endedAt = new Date();
      if (interactive.transcript === 'claude-jsonl') {
        await this.readTranscript(
          input,
          state,
          end.ok ? end.event.transcriptPath : undefined,
          !end.ok || end.event.event !== 'Stop',
        );
      }
      this.saveState(dir, state);
      if (!end.ok) {
        if (end.reason === 'aborted') {
          // Interrupt the TUI's turn the way a person would.
          await this.options.tmux.run(['send-keys', '-t', `=${target}:`, 'Escape']);
          return {
            ok: false,
            endReason: 'cancel',
            endedAt,
            exitCode: null,
            exitSignal: null,
            error: 'cancelled',
            stoppedBy: 'still-running',
          };
        }
        return {
          ok: false,
          endReason: 'backstop',
          endedAt,
          exitCode: null,
          exitSignal: null,
          error: `no Stop hook after ${Math.round(input.backstopMs / 1000)} s; the TUI is left running in ${target}`,
          stoppedBy: 'still-running',
        };
      }
      const event = end.event;
      input.onEvent({
        type: 'turn-end',
        ok: event.event === 'Stop',
        message: event.event === 'Stop' ? undefined : failureText(event),
      });
      if (event.event === 'Stop') {
        return {
          ok: true,
          endReason: 'result',
          endedAt,
          exitCode: null,
          exitSignal: null,
          error: null,
          stoppedBy: 'still-running',
        };
      }
      return {
        ok: false,
        endReason: 'result',
        endedAt,
        exitCode: null,
        exitSignal: null,
        error: failureText(event),
        stoppedBy: 'still-running',
      };
    } finally {
      if (hooks) {
        state.hookOffset = Math.max(state.hookOffset, hooks.offset);
        hooks.close();
      }
      try {
        this.saveState(dir, state);
      } catch {
        // The state dir vanished (session closed under us): nothing to keep.
      }
    }
  }

  private async spawn(
    input: RunTurnInput,
    target: string,
    dir: string,
    eventsFile: string,
    hooks: HookEventsTail | undefined,
  ): Promise<void> {
    const { preset } = input;
    const binary = whichBinary(preset.binary, input.env.PATH, input.cwd);
    if (!binary) throw new LoopError('binary-missing', `engine binary not found: ${preset.binary}`);
    const settingsFile =
      preset.interactive?.hooks === 'claude-settings'
        ? writeSettingsFile(
            dir,
            claudeHookSettings({ node: process.execPath, hookScript: this.options.hookScript, eventsFile }),
          )
        : undefined;
    const args = buildInteractiveArgv(preset, input.engineSessionId as string, settingsFile);
    // The environment travels in a 0600 file the launcher deletes: never argv, never typed.
    const envFile = join(dir, `env-${randomUUID()}.json`);
    writeFileSync(envFile, JSON.stringify({ ...input.env, TERM: 'xterm-256color' }), { mode: 0o600 });
    const created = await this.options.tmux.run([
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
      binary,
      ...args,
    ]);
    if (!created.ok) {
      rmSync(envFile, { force: true });
      throw new LoopError(
        'internal',
        `tmux could not start ${target}: ${created.stderr.trim() || `exit ${created.code}`}`,
      );
    }
    this.options.logger.info('tmux session started', { target });
    if (!hooks) return;
    const ready = await hooks.next(
      { event: 'SessionStart', sessionId: input.engineSessionId },
      { timeoutMs: this.options.readyMs, signal: input.signal },
    );
    if (existsSync(envFile)) rmSync(envFile, { force: true });
    if (!ready.ok) {
      const screen = await this.options.tmux.capturePane(target).catch(() => '');
      await this.options.tmux.killSession(target);
      throw new LoopError(
        'internal',
        `${preset.binary} did not report ready in ${target} within ${Math.round(this.options.readyMs / 1000)} s`,
        {
          hint: `Last screen: ${screen.trim().split('\n').slice(-3).join(' | ').slice(0, 300) || '(empty)'} — first-run dialogs must be pre-answered in the engine's config dir (see docs/engines.md).`,
        },
      );
    }
  }

  /**
   * Paste the prompt as inert text: sanitized (no ESC, so no bracketed-paste end marker; no control
   * characters but newline and tab), from a 0600 file through a uniquely named tmux buffer, with
   * bracketed paste (-p), then Enter after the engine's submit delay; confirmed by UserPromptSubmit.
   */
  private async deliver(
    target: string,
    dir: string,
    prompt: string,
    submitDelayMs: number,
    hooks: HookEventsTail | undefined,
    sessionId: string,
  ): Promise<void> {
    const { tmux } = this.options;
    const text = sanitizeUntrusted(prompt, 1024 * 1024);
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
   * Read the turn's records from the transcript. Claude Code fires Stop before the TUI has always
   * written the turn's last records (observed with 2.1.197), so reading goes on until the TUI's
   * end-of-turn record (`turn_duration`) arrives, or a short grace period ends.
   */
  private async readTranscript(
    input: RunTurnInput,
    state: SessionState,
    path: string | undefined,
    failed: boolean,
  ): Promise<void> {
    const transcriptPath = path ?? state.transcript?.path;
    if (!transcriptPath) return;
    let current =
      state.transcript?.path === transcriptPath ? state.transcript.state : { offset: 0, seenMessageIds: [] };
    const deadline = Date.now() + (failed ? 500 : TRANSCRIPT_GRACE_MS);
    for (;;) {
      const read = await readTranscriptFrom(transcriptPath, current, {
        maxLineBytes: input.maxLineBytes,
        scrub: input.scrub,
      });
      for (const warning of read.warnings) this.options.logger.warn('transcript', { warning });
      for (const event of read.events) input.onEvent(event as TurnEvent);
      current = read.state;
      state.transcript = { path: transcriptPath, state: current };
      if (read.markers.includes('turnEnd') || Date.now() >= deadline) return;
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

function failureText(event: {
  event: string;
  payload?: Readonly<Record<string, unknown>> | undefined;
}): string {
  const payload = event.payload ?? {};
  const parts = [payload.error, payload.last_assistant_message, payload.reason].filter(
    (p): p is string => typeof p === 'string',
  );
  return parts.length ? parts.join(': ').slice(0, 2000) : `the engine reported ${event.event}`;
}
