import { rmSync } from 'node:fs';
import { LoopError } from '../../core/errors.js';
import type { Meter } from '../../core/ports/sessions.js';
import { capabilitiesOf, type EnginePreset } from '../../engines/preset.js';
import type { Runner, RunOutcome, RunTurnInput, SessionProbe } from '../runner.js';
import { checkTarget } from './tmux.js';
import { adoptTurn, probe } from './tmux-adopt.js';
import { deliver } from './tmux-deliver.js';
import { follow } from './tmux-follow.js';
import { retire, spawn } from './tmux-launch.js';
import {
  endedByEngine,
  openTurn,
  releaseTurn,
  saveState,
  stateDir,
  type TmuxRunnerOptions,
  tuiOutcome,
} from './tmux-session-state.js';
import { readTranscriptOnce } from './tmux-transcript.js';

export type { TmuxRunnerOptions } from './tmux-session-state.js';

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

  async runTurn(input: RunTurnInput): Promise<RunOutcome> {
    const ctx = openTurn(this.options, input, 'last-turn');
    const { state, hooks, target } = ctx;
    const interactive = input.preset.interactive as NonNullable<EnginePreset['interactive']>;
    let keepTurn = false;
    try {
      if (!(await this.options.tmux.hasSession(target))) {
        const failed = await spawn(this.options, ctx);
        if (failed) return failed;
      } else if ((state.launchKey ?? null) !== (input.launchKey ?? null)) {
        return await retire(this.options, ctx);
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
        await readTranscriptOnce(this.options, ctx);
        ctx.turnEnded = false;
      }
      state.turn = {
        id: input.turnId ?? 0,
        phase: 'delivering',
        hookOffset: hooks?.offset ?? state.hookOffset,
        transcript: state.transcript && structuredClone(state.transcript),
      };
      saveState(ctx.dir, state);
      await deliver(this.options, ctx, interactive.submitDelayMs);
      if (!hooks) {
        // Nothing tells us when this engine's turn ends: say so, and do not pretend to measure it.
        return tuiOutcome({ ok: true, endReason: 'untracked', error: null });
      }
      state.turn.phase = 'submitted';
      saveState(ctx.dir, state);
      const outcome = await follow(this.options, ctx, Date.now() + input.backstopMs);
      keepTurn = outcome.detached === true;
      return outcome;
    } finally {
      releaseTurn(ctx, keepTurn);
    }
  }

  adoptTurn(
    input: RunTurnInput & { turnId: number },
  ): Promise<RunOutcome | { adopted: false; reason: string }> {
    return adoptTurn(this.options, input);
  }

  probe(session: {
    slug: string;
    tmuxTarget: string | null;
    engineSessionId?: string | null;
  }): Promise<SessionProbe> {
    return probe(this.options, session, () => this.check());
  }

  async closeSession(session: { slug: string; tmuxTarget: string | null }): Promise<string> {
    if (!session.tmuxTarget) return 'no tmux session';
    const killed = await this.options.tmux.killSession(checkTarget(session.tmuxTarget));
    rmSync(stateDir(this.options, session.slug), { recursive: true, force: true });
    return killed
      ? `tmux session ${session.tmuxTarget} ended`
      : `tmux session ${session.tmuxTarget} was already gone`;
  }
}
