import type { TurnEvent, Usage } from '../core/events.js';
import type { SessionRecord, TurnRecord } from '../core/ports/sessions.js';
import { capabilitiesOf } from '../engines/capabilities.js';
import type { EnginePreset } from '../engines/preset.js';
import type { Payer } from '../ledger/payer.js';
import { turnUsageFrom } from '../ledger/usage.js';
import type { Logger } from '../log/logger.js';
import { isSessionHolding, type Runner, type RunOutcome, type RunTurnInput } from '../runners/runner.js';
import { InOrder } from './in-order.js';
import type { TurnRequest, TurnResult, TurnServiceDeps } from './turn-types.js';

const ENGINE_SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

/** A begun turn, ready to run on its runner. */
export interface DriveInput {
  session: SessionRecord;
  turn: TurnRecord;
  preset: EnginePreset;
  env: Record<string, string>;
  prompt: string;
  created: boolean;
  request: Pick<TurnRequest, 'signal' | 'onEvent'>;
  log: Logger;
  payer: Payer;
  backstopMs?: number;
  preToolHook?: RunTurnInput['preToolHook'];
  sandbox?: RunTurnInput['sandbox'];
  launchKey?: string | undefined;
  /** After the engine is gone (its turn's token revoked). */
  release?: (() => Promise<void>) | undefined;
  start: (input: RunTurnInput) => Promise<RunOutcome>;
}

/** A wire-metered turn's usage: the gateway's totals, the engine's own cost figure kept. */
function withWireTotals(
  usage: ReturnType<typeof turnUsageFrom>,
  wire: { usage: Usage; model: string | null } | undefined,
): ReturnType<typeof turnUsageFrom> {
  if (!wire) return usage;
  return { ...usage, usage: wire.usage, model: usage.model ?? wire.model };
}

/**
 * What a turn says besides its outcome: the tool calls its engine's permission mode refused (never
 * silent). The policy hook's refusals (`byPolicy`, its own record) are acts, recorded as such.
 */
export function turnWarnings(events: readonly TurnEvent[]): string[] {
  const refused = events.filter(
    (e): e is Extract<TurnEvent, { type: 'tool-refused' }> =>
      e.type === 'tool-refused' && e.byPolicy !== true,
  );
  if (refused.length === 0) return [];
  const tools = [...new Set(refused.map((e) => e.tool))].slice(0, 5).join(', ');
  return [
    `the engine refused ${refused.length} tool call${refused.length === 1 ? '' : 's'} (${tools}) for want of a permission nobody could give: set the engine's permissions.mode, or run it in the sandbox`,
  ];
}

/**
 * The second half of a turn: run it on its runner and record everything it did — its events
 * (scrubbed), how it ended, its usage in the ledger, its acts, the session's state after it.
 */
export class TurnDriver {
  constructor(
    private readonly deps: TurnServiceDeps,
    private readonly runnerOf: (name: string) => Runner,
  ) {}

  async drive(input: DriveInput): Promise<TurnResult> {
    const { store } = this.deps;
    const { session, turn, created, log } = input;
    const events: TurnEvent[] = [];
    // What the runner's callbacks record, stored in the order they came, all of it before the end.
    const writes = new InOrder((what, error) => log.error(`could not ${what}`, { error }));
    let outcome: RunOutcome;
    try {
      outcome = await input.start(
        this.runInput(input, writes, (event) => this.onEvent(input, writes, events, event)),
      );
      await writes.drained();
    } catch (error) {
      // A runner bug must still leave a consistent registry: the turn is recorded failed.
      await writes.drained();
      await this.failTurn(session, turn.id, error);
      throw error;
    } finally {
      // The engine is gone (release is given for the process runner only: a TUI keeps its token).
      await input.release?.();
    }
    if (outcome.detached) {
      // The engine goes on without us (the daemon is stopping): the turn stays running, to be adopted.
      log.info('turn left running for the next daemon to adopt');
      return { session: (await store.get(session.id)) ?? session, turn, created, outcome };
    }
    const { finished, usage, fresh } = await this.finish(input, events, outcome);
    await this.afterFinish(input, finished, events, usage, outcome);
    if (outcome.sessionGone)
      await this.markGone(session, outcome.sessionGone.status, outcome.sessionGone.reason);
    return { session: (await store.get(session.id)) ?? fresh, turn: finished, created, outcome };
  }

  private runInput(input: DriveInput, writes: InOrder, onEvent: (event: TurnEvent) => void): RunTurnInput {
    const { defaults } = this.deps;
    const { session, turn, preset } = input;
    const caps = capabilitiesOf(preset);
    return {
      preset,
      session: { id: session.id, slug: session.slug, tmuxTarget: session.tmuxTarget },
      turnId: turn.id,
      engineSessionId: session.engineSessionId ?? undefined,
      first: !session.engineSessionStarted || !caps.resume,
      prompt: input.prompt,
      cwd: session.cwd,
      env: input.env,
      backstopMs: input.backstopMs ?? defaults.backstopMs,
      killGraceMs: defaults.killGraceMs,
      maxLineBytes: defaults.maxLineBytes,
      signal: input.request.signal,
      scrub: this.deps.scrub,
      preToolHook: input.preToolHook,
      sandbox: input.sandbox,
      launchKey: input.launchKey,
      onEvent,
      onSpawn: (pid) => {
        // The engine takes a second or so to start: the price data its rows need loads meanwhile,
        // instead of between its last output and the end of the turn.
        setImmediate(() => this.deps.ledger?.warmPrices());
        return writes.run("record the engine's pid", () => this.deps.store.setTurnPid(turn.id, pid));
      },
      // An adopted turn (adoptTurn only): the runner replays it from its structured sources once it
      // has taken it over, so what an earlier process stored of it is replaced (kept if refused).
      onAdopt: () =>
        writes.run("forget an adopted turn's stored events", () => this.deps.store.clearEvents(turn.id)),
    };
  }

  /** Every event of the turn: marked, scrubbed, kept, stored (in order, through `writes`), shown. */
  private onEvent(input: DriveInput, writes: InOrder, events: TurnEvent[], given: TurnEvent): void {
    const { session, turn, log } = input;
    // Claude Code lists the policy hook's refusals among its permission denials: they are acts
    // (recorded as blocked), not the permission mode's doing — and the engine's own list is what
    // corroborates the hook's record, which the agent can write (acts/audit.ts `corroborated`).
    const raw: TurnEvent =
      given.type === 'tool-refused' && given.id && this.policyRefusals(session).has(given.id)
        ? { ...given, byPolicy: true }
        : given;
    // Scrub before anything keeps or shows it: an engine may echo a credential.
    let event: TurnEvent;
    try {
      event = JSON.parse(this.deps.scrub(JSON.stringify(raw))) as TurnEvent;
    } catch {
      event = {
        type: 'diagnostic',
        message: `a ${raw.type} event could not be serialised (too deeply nested) and was dropped`,
      };
    }
    events.push(event);
    this.noteAttention(session, event, writes, log);
    if (event.type === 'session') {
      const { engineSessionId } = event;
      const preassigned = capabilitiesOf(input.preset).preassignedId;
      writes.run('record the engine session id', () =>
        this.onSessionEvent(session, engineSessionId, preassigned, log),
      );
    }
    writes.run('store a turn event', () => this.deps.store.appendEvent(turn.id, event));
    input.request.onEvent?.(event);
  }

  /** The turn's end, usage and warnings, recorded. */
  private async finish(
    input: DriveInput,
    events: readonly TurnEvent[],
    outcome: RunOutcome,
  ): Promise<{ finished: TurnRecord; usage: ReturnType<typeof turnUsageFrom>; fresh: SessionRecord }> {
    const { store } = this.deps;
    const { session, turn, preset, log } = input;
    try {
      const fresh = (await store.get(session.id)) ?? session;
      let usage = turnUsageFrom(events, preset.usageScope, fresh.usageBaseline);
      // Metered at the wire, the turn's figures are what the gateway saw (also when the engine
      // reported none, as when a budget refusal ended it).
      if (turn.meter === 'wire') usage = withWireTotals(usage, await this.deps.ledger?.turnTotals(turn.id));
      for (const warning of usage.warnings) log.warn(warning);
      if (usage.nextBaseline) await store.setUsageBaseline(session.id, usage.nextBaseline);
      const finished = await store.finishTurn(turn.id, {
        status: outcome.ok ? 'succeeded' : 'failed',
        endReason: outcome.endReason,
        endedAt: outcome.endedAt.toISOString(),
        exitCode: outcome.exitCode,
        exitSignal: outcome.exitSignal,
        model: usage.model,
        usage: usage.usage,
        costUsd: usage.costUsd,
        error: outcome.error,
        warnings: turnWarnings(events),
      });
      return { finished, usage, fresh };
    } catch (error) {
      // Never leave a turn `running` with a live owner: that would wedge its session.
      await this.failTurn(session, turn.id, error);
      throw error;
    }
  }

  /** What follows a recorded turn: the ledger, the acts audit, the session's holds. */
  private async afterFinish(
    input: DriveInput,
    finished: TurnRecord,
    events: readonly TurnEvent[],
    usage: ReturnType<typeof turnUsageFrom>,
    outcome: RunOutcome,
  ): Promise<void> {
    const { store } = this.deps;
    const { session, log } = input;
    await this.clearWaiting(session.id, log);
    for (const warning of finished.warnings) log.warn(warning);
    log.info('turn ended', {
      status: finished.status,
      endReason: finished.endReason,
      exitCode: finished.exitCode,
      stoppedBy: outcome.stoppedBy,
      metered: finished.usage !== null,
    });
    await this.record(input, finished, events, usage, outcome);
    try {
      await this.deps.auditTurn?.((await store.get(session.id)) ?? session, finished, events);
    } catch (error) {
      log.error('could not record the acts of the turn', { error });
    }
    try {
      const now = await store.get(session.id);
      if (now) await this.deps.afterTurn?.(now);
    } catch (error) {
      log.error('could not check the session after its turn', { error });
    }
  }

  /** Record a session as lost or ended, and let its runner clean up what it kept for it. */
  async markGone(session: SessionRecord, status: 'lost' | 'ended', reason: string): Promise<SessionRecord> {
    const gone = await this.deps.store.markGone(session.id, status, reason);
    this.deps.logger.warn(`session ${status}`, { workItem: session.workItem, session: session.id, reason });
    try {
      const runner = this.runnerOf(session.runner);
      if (isSessionHolding(runner)) await runner.closeSession(session);
    } catch (error) {
      this.deps.logger.warn('could not clean up after a session', { session: session.id, error });
    }
    return gone;
  }

  private policyRefusals(session: SessionRecord): ReadonlySet<string> {
    try {
      return this.deps.policyRefusals?.(session) ?? new Set();
    } catch {
      return new Set();
    }
  }

  /** The turn in the usage ledger: its rows, or an unmetered drive saying why nothing measured it. */
  private async record(
    input: { session: SessionRecord; payer: Payer; log: Logger },
    turn: TurnRecord,
    events: readonly TurnEvent[],
    usage: ReturnType<typeof turnUsageFrom>,
    outcome: RunOutcome,
  ): Promise<void> {
    const { ledger } = this.deps;
    if (!ledger) return;
    const { session } = input;
    const reason =
      turn.meter === 'none'
        ? `the ${session.engine} engine reports no usage on the ${session.runner} runner`
        : outcome.endReason === 'untracked'
          ? 'nothing reports this TUI turn (no hooks or transcript)'
          : 'the engine reported no usage for this turn';
    try {
      const recorded = await ledger.recordTurn(
        {
          sessionId: session.id,
          workItem: session.workItem,
          turnId: turn.id,
          engine: session.engine,
          runner: session.runner,
          meter: turn.meter,
          endedAt: turn.endedAt ?? new Date().toISOString(),
          payer: input.payer,
        },
        events,
        usage,
        reason,
      );
      for (const warning of recorded.warnings) input.log.warn(warning);
    } catch (error) {
      input.log.error('could not record the turn in the usage ledger', { error });
    }
  }

  /** Best-effort: record a turn as failed after an unexpected error. */
  private async failTurn(session: SessionRecord, turnId: number, error: unknown): Promise<void> {
    try {
      await this.deps.store.finishTurn(turnId, {
        status: 'failed',
        endReason: 'error',
        endedAt: new Date().toISOString(),
        exitCode: null,
        exitSignal: null,
        model: null,
        usage: null,
        costUsd: null,
        error: error instanceof Error ? error.message : String(error),
      });
      // Nothing measured what it may have used.
      await this.deps.ledger?.recordUnmetered({
        at: new Date().toISOString(),
        sessionId: session.id,
        workItem: session.workItem,
        turnId,
        engine: session.engine,
        runner: session.runner,
        reason: this.deps.scrub(
          `failed before its usage was recorded: ${error instanceof Error ? error.message : String(error)}`,
        ),
      });
    } catch (inner) {
      this.deps.logger.error('could not record a failed turn', { turn: turnId, error: inner });
    }
  }

  /**
   * A TUI at a permission prompt waits for a person: the session says so until the engine goes on
   * (any later progress of the turn, or its end).
   */
  private noteAttention(session: SessionRecord, event: TurnEvent, writes: InOrder, log: Logger): void {
    if (event.type === 'attention' && event.waiting) {
      const waiting = { since: new Date().toISOString(), message: event.message ?? 'a permission prompt' };
      writes.run('record that the engine waits', () => this.deps.store.setWaiting(session.id, waiting));
      log.warn('the engine waits for a person', { message: event.message });
    } else if (
      event.type === 'attention' ||
      event.type === 'tool-result' ||
      event.type === 'text' ||
      event.type === 'turn-end'
    ) {
      writes.run('record that the engine went on', () => this.clearWaiting(session.id, log));
    }
  }

  private async clearWaiting(sessionId: string, log: Logger): Promise<void> {
    try {
      if ((await this.deps.store.get(sessionId))?.waiting) await this.deps.store.setWaiting(sessionId, null);
    } catch (error) {
      log.error('could not record that the engine went on', { error });
    }
  }

  private async onSessionEvent(
    session: SessionRecord,
    id: string,
    preassigned: boolean,
    log: Logger,
  ): Promise<void> {
    // The id goes back into argv (`--resume <id>`): only a plain token is accepted.
    if (!ENGINE_SESSION_ID.test(id)) {
      log.warn('ignored an engine session id that is not a plain token', { length: id.length });
      return;
    }
    if (preassigned && session.engineSessionId && id !== session.engineSessionId) {
      log.warn('the engine reported a different session id than the one pinned', {
        pinned: session.engineSessionId,
        reported: id,
      });
      return;
    }
    if (!session.engineSessionStarted || session.engineSessionId !== id) {
      await this.deps.store.markEngineSessionStarted(session.id, id);
    }
  }
}
