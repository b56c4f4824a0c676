import { rmSync } from 'node:fs';
import { LoopError } from '../../core/errors.js';
import { capabilitiesOf } from '../../engines/capabilities.js';
import type { EnginePreset } from '../../engines/preset.js';
import type { SentKey } from '../keys.js';
import type {
  Adopting,
  Attachable,
  Checking,
  Keyed,
  Probing,
  Runner,
  RunOutcome,
  RunTurnInput,
  Selective,
  SessionHolding,
  SessionProbe,
} from '../runner.js';
import { checkTarget } from './tmux.js';
import { adoptTurn, probe } from './tmux-adopt.js';
import { deliver } from './tmux-deliver.js';
import { follow } from './tmux-follow.js';
import { readyForTurn } from './tmux-launch.js';
import {
  openTurn,
  releaseTurn,
  saveState,
  stateDir,
  type TmuxRunnerOptions,
  tuiOutcome,
} from './tmux-session-state.js';
import { attachCommand, pressKeys } from './tmux-terminal.js';

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
export class TmuxRunner
  implements Runner, Checking, Selective, SessionHolding, Adopting, Probing, Keyed, Attachable
{
  readonly name = 'tmux';
  readonly mode = 'interactive';

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

  async runTurn(input: RunTurnInput): Promise<RunOutcome> {
    const ctx = openTurn(this.options, input, 'last-turn');
    const { state, hooks } = ctx;
    const interactive = input.preset.interactive as NonNullable<EnginePreset['interactive']>;
    let keepTurn = false;
    try {
      const ready = await readyForTurn(this.options, ctx);
      if (!ready.ok) {
        // Nothing started: the caller is told, as with any turn that could not begin.
        if ('error' in ready) throw ready.error;
        return ready.outcome;
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

  async sendKeys(
    session: { workItem: string; tmuxTarget: string | null },
    _preset: EnginePreset | undefined,
    keys: readonly string[],
  ): Promise<{ target: string; sent: SentKey[] }> {
    if (!session.tmuxTarget) {
      throw new LoopError(
        'usage',
        `${session.workItem} runs on the ${this.name} runner: its engine has no terminal to type into`,
      );
    }
    return { target: session.tmuxTarget, sent: await pressKeys(this.options.tmux, session.tmuxTarget, keys) };
  }

  attachCommand(
    session: { tmuxTarget: string; status: string },
    options: { readOnly?: boolean | undefined },
  ): Promise<{ file: string; args: string[] }> {
    return attachCommand(this.options.tmux, session, options);
  }
}
