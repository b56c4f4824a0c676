import { createHash, randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { describeError, LoopError } from '../core/errors.js';
import { formatWorkItem, parseWorkItem, type WorkItem, workItemSlug } from '../core/work-item.js';
import { buildEngineEnv, type EngineEnv } from '../engines/env.js';
import { capabilitiesOf, type EnginePreset } from '../engines/preset.js';
import type { TurnEvent, Usage } from '../engines/protocols/types.js';
import { whichBinary } from '../engines/which.js';
import type { Ledger } from '../ledger/ledger.js';
import type { Payer } from '../ledger/payer.js';
import { turnUsageFrom } from '../ledger/usage.js';
import type { Logger } from '../log/logger.js';
import type { Runner, RunOutcome, RunTurnInput } from '../runners/runner.js';
import { recordUnmeteredTurn } from './registry.js';
import type { SessionRecord, SessionStore, TurnGuard, TurnRecord } from './types.js';

export interface TurnRequest {
  workItem: string;
  prompt: string;
  /** Engine for a new session (an existing session keeps its own; naming another is an error when strict). */
  engine?: string | undefined;
  /**
   * true (by hand): an engine, runner or cwd that differs from the existing session's is an error.
   * false (webhooks): they only apply to a new session; an existing session keeps its own.
   */
  strict?: boolean | undefined;
  /** The inbox delivery this turn runs (recorded on the turn). */
  deliveryId?: string | undefined;
  runner?: string | undefined;
  cwd?: string | undefined;
  signal?: AbortSignal | undefined;
  /** Every event of the turn, already scrubbed of secrets. */
  onEvent?: ((event: TurnEvent) => void) | undefined;
  /** Called once the session is known (created or found), before the engine starts. */
  onSession?: ((session: SessionRecord, created: boolean) => void) | undefined;
}

export interface TurnPlan {
  item: WorkItem;
  workItem: string;
  promptBytes: number;
  /** The active session, or undefined when the turn will create one. */
  session: SessionRecord | undefined;
  preset: EnginePreset;
  engineName: string;
  runnerName: string;
  cwd: string;
  env: EngineEnv;
}

export interface TurnResult {
  session: SessionRecord;
  turn: TurnRecord;
  created: boolean;
  outcome: RunOutcome;
}

export interface TurnServiceDeps {
  store: SessionStore;
  runners: Record<string, Runner>;
  engines: Record<string, EnginePreset>;
  defaults: {
    engine: string;
    runner: string;
    cwd: string;
    backstopMs: number;
    killGraceMs: number;
    maxLineBytes: number;
  };
  /** The daemon's environment, source of pass-through and credential variables. */
  env: Readonly<Record<string, string | undefined>>;
  /** Registers secret values so nothing stores or prints them. */
  addSecret: (value: string) => void;
  scrub: (text: string) => string;
  logger: Logger;
  /** After each recorded turn, with the session as it is now (budgets are checked there). */
  afterTurn?: ((session: SessionRecord) => void) | undefined;
  /**
   * The merge policy's pre-tool hook for a session whose engine has one (written before each turn);
   * undefined: none. Headless turns get its settings file in argv; the tmux runner registers it.
   */
  policyHook?:
    | ((
        session: SessionRecord,
        preset: EnginePreset,
      ) => { command: string; matcher: string; settingsFile: string } | undefined)
    | undefined;
  /** The acts audit: the turn's consequential acts, recorded (a breach holds the session). */
  auditTurn?: ((session: SessionRecord, turn: TurnRecord, events: readonly TurnEvent[]) => void) | undefined;
  /** The usage ledger: every finished turn is recorded there (rows, or an unmetered drive). */
  ledger?: Ledger | undefined;
  /** Who pays for an engine environment's requests (by credential kind and fingerprint). */
  payer?: ((credential: EngineEnv['credential'], env: Record<string, string>) => Payer) | undefined;
  /**
   * The OpenTelemetry meter: the environment pointing an opted-in engine's exporter at the receiver
   * (undefined: the engine does not opt in, or nothing receives). Its turns are then metered `otel`.
   */
  telemetry?:
    | { envFor(sessionId: string, preset: EnginePreset): Record<string, string> | undefined }
    | undefined;
  /**
   * What guards the engine: the gateway's token and environment, the sandbox, the permission mode.
   * Called before the turn is begun (a failure leaves no turn behind). Undefined: the engine runs
   * with the environment as built.
   */
  prepareEngine?: ((input: PrepareEngineInput) => PreparedEngine) | undefined;
  /**
   * The tool calls the policy hook refused in a session (its own record): Claude Code lists them
   * among its permission denials, but they are the policy's refusals, not the permission mode's.
   */
  policyRefusals?: ((session: SessionRecord) => ReadonlySet<string>) | undefined;
}

export interface PrepareEngineInput {
  session: SessionRecord;
  preset: EnginePreset;
  /** The engine's environment from the allow-list (it may hold real credentials). */
  env: Record<string, string>;
}

export interface PreparedEngine {
  env: Record<string, string>;
  /** Added to the headless argv and the TUI's. */
  args: string[];
  interactiveArgs: string[];
  sandbox: RunTurnInput['sandbox'];
  guard: TurnGuard;
  /** `wire`: the gateway meters the engine's model requests. */
  meter?: 'wire' | undefined;
  /** What guards the engine (sandbox, gateway address, permission mode), as a key (see RunTurnInput). */
  launchKey?: string | undefined;
  /** Called when the turn ends on the process runner: the turn's capability token is revoked. */
  release?: (() => void) | undefined;
  /** Said at the start of the turn (no sandbox, a credential the gateway cannot hold…). */
  notes: string[];
}

/** A wire-metered turn's usage: the gateway's totals, the engine's own cost figure kept. */
function withWireTotals(
  usage: ReturnType<typeof turnUsageFrom>,
  wire: { usage: Usage; model: string | null } | undefined,
): ReturnType<typeof turnUsageFrom> {
  if (!wire) return usage;
  return { ...usage, usage: wire.usage, model: usage.model ?? wire.model };
}

/** The preset with arguments added to its headless argv and to its TUI's. */
function withArgs(preset: EnginePreset, args: string[], interactiveArgs: string[]): EnginePreset {
  if (args.length === 0 && interactiveArgs.length === 0) return preset;
  return {
    ...preset,
    extraArgs: [...preset.extraArgs, ...args],
    interactive: preset.interactive && {
      ...preset.interactive,
      args: [...preset.interactive.args, ...interactiveArgs],
    },
  };
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

/** What a refused adoption reports to `drive` (nothing of it is recorded). */
const DETACHED: Omit<RunOutcome, 'endedAt'> = {
  ok: false,
  endReason: 'lost',
  exitCode: null,
  exitSignal: null,
  error: null,
  stoppedBy: 'still-running',
  detached: true,
};

const ENGINE_SESSION_ID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
const digest = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;
// Linux caps one argv element at 128 KiB (MAX_ARG_STRLEN) and the turn text is one element, with
// room left for a prompt flag around it. Longer context belongs in files in the working directory.
const MAX_PROMPT_BYTES = 120 * 1024;

/**
 * Runs one turn of a work item's session: finds or creates the session, builds the engine's
 * environment, runs the turn on the session's runner, and records the turn, its events and its
 * usage. Failures of the engine are recorded turns, not exceptions.
 */
export class TurnService {
  constructor(private readonly deps: TurnServiceDeps) {}

  private preset(name: string): EnginePreset {
    const preset = Object.hasOwn(this.deps.engines, name) ? this.deps.engines[name] : undefined;
    if (!preset) {
      throw new LoopError('engine-unknown', `unknown engine "${name}"`, {
        hint: `Known engines: ${Object.keys(this.deps.engines).join(', ')}. Declare new ones under engines: in the config.`,
      });
    }
    return preset;
  }

  private runner(name: string): Runner {
    const runner = Object.hasOwn(this.deps.runners, name) ? this.deps.runners[name] : undefined;
    if (!runner) {
      throw new LoopError('engine-unsupported', `unknown runner "${name}"`, {
        hint: `Available runners: ${Object.keys(this.deps.runners).join(', ')}.`,
      });
    }
    return runner;
  }

  private resolveBinary(
    preset: EnginePreset,
    engineName: string,
    env: Record<string, string>,
    cwd: string,
  ): string {
    const found = whichBinary(preset.binary, env.PATH, cwd);
    if (!found) {
      throw new LoopError(
        'binary-missing',
        `the ${engineName} engine's binary "${preset.binary}" was not found on PATH`,
        {
          hint: preset.install
            ? `Install it: ${preset.install} — or set engines.${engineName}.binary to its path. \`the-loop doctor\` checks every engine.`
            : `Set engines.${engineName}.binary to its path. \`the-loop doctor\` checks every engine.`,
        },
      );
    }
    return found;
  }

  /**
   * Every check a turn makes before anything is created or started, with no side effects: a bad
   * work item, prompt, engine, runner, cwd or a missing binary is refused here (invariant 7).
   */
  preflight(request: TurnRequest): TurnPlan {
    const { store, defaults } = this.deps;
    const item = parseWorkItem(request.workItem);
    const workItem = formatWorkItem(item);
    const promptBytes = Buffer.byteLength(request.prompt, 'utf8');
    if (request.prompt.trim() === '') throw new LoopError('usage', 'the prompt is empty');
    if (promptBytes > MAX_PROMPT_BYTES) {
      throw new LoopError('usage', `the prompt is ${promptBytes} bytes; the limit is ${MAX_PROMPT_BYTES}`, {
        hint: 'Put long context in a file in the working directory and refer to it in the prompt.',
      });
    }
    const strict = request.strict ?? true;
    const session = store.findActive(workItem);
    if (session) {
      if (strict && request.engine && request.engine !== session.engine) {
        throw new LoopError('usage', `${workItem} already has an active ${session.engine} session`, {
          hint: `Close it first (\`the-loop sessions close ${workItem}\`) to start one on ${request.engine}.`,
        });
      }
      if (strict && request.cwd && resolve(request.cwd) !== session.cwd) {
        throw new LoopError(
          'usage',
          `${workItem}'s session runs in ${session.cwd}, not ${resolve(request.cwd)}`,
          {
            hint: `Omit --cwd, or close the session first (\`the-loop sessions close ${workItem}\`).`,
          },
        );
      }
      if (strict && request.runner && request.runner !== session.runner) {
        throw new LoopError(
          'usage',
          `${workItem}'s session runs on the ${session.runner} runner, not ${request.runner}`,
        );
      }
      const preset = this.preset(session.engine);
      const env = buildEngineEnv(preset, this.deps.env);
      this.checkCwd(session.cwd);
      this.resolveBinary(preset, session.engine, env.env, session.cwd);
      return {
        item,
        workItem,
        promptBytes,
        session,
        preset,
        engineName: session.engine,
        runnerName: session.runner,
        cwd: session.cwd,
        env,
      };
    }
    const engineName = request.engine ?? defaults.engine;
    const preset = this.preset(engineName);
    const runnerName = request.runner ?? defaults.runner;
    // An engine this runner cannot drive is refused before anything is registered (invariant 7).
    this.runner(runnerName).supports?.(preset, engineName);
    const cwd = resolve(request.cwd ?? defaults.cwd);
    this.checkCwd(cwd);
    const env = buildEngineEnv(preset, this.deps.env);
    this.resolveBinary(preset, engineName, env.env, cwd);
    return { item, workItem, promptBytes, session: undefined, preset, engineName, runnerName, cwd, env };
  }

  async runTurn(request: TurnRequest): Promise<TurnResult> {
    const { store, logger } = this.deps;
    const plan = this.preflight(request);
    const { workItem, promptBytes, preset, env } = plan;
    // Every turn re-checks the runner's tools (tmux removed under a running daemon): a clear error,
    // never a silent fallback to another runner.
    const planned = this.runner(plan.runnerName);
    await planned.check?.();
    let session = plan.session;
    let created = false;
    const payer = this.payerOf(env);
    if (!session) {
      session = store.create({
        workItem,
        slug: workItemSlug(plan.item),
        engine: plan.engineName,
        runner: plan.runnerName,
        // Pre-assigned id: known before the engine starts (capture engines announce theirs).
        engineSessionId: capabilitiesOf(preset).preassignedId ? randomUUID() : null,
        cwd: plan.cwd,
        credentialKind: env.credential?.kind ?? null,
        credentialEnv: env.credential?.env ?? null,
        payerId: payer.id,
        tmuxTarget: planned.targetFor?.(workItemSlug(plan.item)) ?? null,
      });
      created = true;
      logger.info('session created', {
        workItem,
        session: session.id,
        engine: plan.engineName,
        runner: plan.runnerName,
      });
    }
    for (const value of env.secretValues) this.deps.addSecret(value);
    if (
      !created &&
      ((env.credential?.kind ?? null) !== session.credentialKind || payer.id !== session.payerId)
    ) {
      store.setCredential(session.id, env.credential?.kind ?? null, env.credential?.env ?? null, payer.id);
    }
    request.onSession?.(session, created);

    const caps = capabilitiesOf(preset);
    const runner = this.runner(session.runner);
    // The policy hook, the gateway's token and the sandbox are prepared before the turn is begun: a
    // failure to prepare them leaves no turn behind.
    const hook = this.deps.policyHook?.(session, preset);
    const headlessHook = hook && session.runner === 'process';
    // A TUI registers it only beside its own Claude settings hooks; elsewhere acts are judged after.
    const tuiHook = hook && session.runner !== 'process' && preset.interactive?.hooks === 'claude-settings';
    const prepared = this.deps.prepareEngine?.({ session, preset, env: env.env });
    // OpenTelemetry meters headless turns only: a TUI gets its environment once, when it starts, so
    // its exporter may point at a receiver long gone; the tmux runner meters from the transcript.
    // The gateway's wire meter, when it serves the engine, is the only one (nothing counted twice).
    const otelEnv =
      session.runner === 'process' && !prepared?.meter
        ? this.deps.telemetry?.envFor(session.id, preset)
        : undefined;
    const turn = store.beginTurn(session.id, {
      promptDigest: digest(request.prompt),
      promptBytes,
      meter: prepared?.meter ?? (otelEnv ? 'otel' : (runner.meterFor?.(preset) ?? caps.meter)),
      deliveryId: request.deliveryId,
      guard: prepared?.guard,
    });
    const log = logger.child({ workItem, session: session.id, turn: turn.seq });
    log.info('turn started', {
      engine: session.engine,
      runner: session.runner,
      promptBytes,
      sandbox: prepared?.guard.sandbox,
      gateway: prepared?.guard.gateway.model,
      permissions: prepared?.guard.permissions,
    });
    for (const note of prepared?.notes ?? []) log.warn(note);
    // Said, never silent (invariant 7): what the config asks for that this runner cannot do.
    if (preset.otel?.enabled && session.runner !== 'process') {
      log.warn('otel.enabled is not used on this runner: the session is metered from its transcript', {
        runner: session.runner,
      });
    }
    if (hook && session.runner !== 'process' && !tuiHook) {
      log.warn(
        'this TUI has no Claude settings hooks to carry the policy hook: its acts are judged after the turn',
        {
          runner: session.runner,
        },
      );
    }
    return this.drive({
      session,
      turn,
      preset: withArgs(
        preset,
        [...(prepared?.args ?? []), ...(headlessHook ? ['--settings', hook.settingsFile] : [])],
        prepared?.interactiveArgs ?? [],
      ),
      preToolHook: tuiHook ? { command: hook.command, matcher: hook.matcher } : undefined,
      sandbox: prepared?.sandbox,
      launchKey: prepared?.launchKey,
      release: session.runner === 'process' ? prepared?.release : undefined,
      env: { ...(prepared?.env ?? env.env), ...otelEnv },
      prompt: request.prompt,
      created,
      request,
      log,
      payer,
      start: (input) => runner.runTurn(input),
    });
  }

  /**
   * Follow a turn an earlier process started and did not finish, on its session's runner, and record
   * it as if this process had run it. Returns undefined when the runner cannot adopt it: the turn is
   * then recorded lost (its delivery runs again).
   */
  async adoptTurn(
    turn: TurnRecord,
    request: Pick<TurnRequest, 'signal' | 'onEvent' | 'onSession'> = {},
  ): Promise<TurnResult | undefined> {
    const { store, logger } = this.deps;
    const session = store.get(turn.sessionId);
    const runner = session ? this.runner(session.runner) : undefined;
    const lost = (why: string) => {
      store.markTurnLost(turn.id, `the process running this turn ended; it could not be adopted: ${why}`);
      logger.warn('could not adopt a running turn', { turn: turn.id, reason: why });
      return undefined;
    };
    if (session?.status !== 'active') return lost(`its session is ${session?.status ?? 'missing'}`);
    if (!runner?.adoptTurn) return lost(`the ${session.runner} runner cannot adopt turns`);
    let preset: EnginePreset;
    let env: EngineEnv;
    try {
      // The config may have changed across the restart (an engine renamed): then nothing can follow it.
      preset = this.preset(session.engine);
      env = buildEngineEnv(preset, this.deps.env);
    } catch (error) {
      return lost(describeError(error));
    }
    for (const value of env.secretValues) this.deps.addSecret(value);
    store.adoptTurn(turn.id);
    const log = logger.child({ workItem: session.workItem, session: session.id, turn: turn.seq });
    request.onSession?.(session, false);
    let refused: string | undefined;
    const result = await this.drive({
      session,
      turn,
      preset,
      env: env.env,
      prompt: '',
      created: false,
      request,
      log,
      payer: this.payerOf(env),
      // The backstop runs from the turn's start, not from the adoption.
      backstopMs: Math.max(1000, Date.parse(turn.startedAt) + this.deps.defaults.backstopMs - Date.now()),
      start: async (input) => {
        const outcome = await (runner.adoptTurn as NonNullable<Runner['adoptTurn']>)({
          ...input,
          turnId: turn.id,
          // The runner replays the turn from its structured sources once it has taken it over: what
          // an earlier process stored of it is replaced then (and kept if it is refused).
          onAdopt: () => store.clearEvents(turn.id),
        });
        if ('adopted' in outcome) {
          refused = outcome.reason;
          return { ...DETACHED, endedAt: new Date() };
        }
        log.info('adopted a turn left running by an earlier process');
        return outcome;
      },
    });
    if (refused !== undefined) return lost(refused);
    return result;
  }

  /** Run a begun turn on its runner and record how it ended, its events and its usage. */
  private async drive(input: {
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
    release?: (() => void) | undefined;
    start: (input: RunTurnInput) => Promise<RunOutcome>;
  }): Promise<TurnResult> {
    const { store, defaults } = this.deps;
    const { session, turn, preset, request, log, created } = input;
    const caps = capabilitiesOf(preset);
    const events: TurnEvent[] = [];
    const first = !session.engineSessionStarted || !caps.resume;
    const current = session;
    const onEvent = (given: TurnEvent) => {
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
      this.noteAttention(current, event, log);
      if (event.type === 'session') {
        try {
          this.onSessionEvent(current, event.engineSessionId, caps.preassignedId, log);
        } catch (error) {
          log.error('could not record the engine session id', { error });
        }
      }
      try {
        store.appendEvent(turn.id, event);
      } catch (error) {
        log.error('could not store a turn event', { error });
      }
      request.onEvent?.(event);
    };

    let outcome: RunOutcome;
    try {
      outcome = await input.start({
        preset,
        session: { id: session.id, slug: session.slug, tmuxTarget: session.tmuxTarget },
        turnId: turn.id,
        engineSessionId: session.engineSessionId ?? undefined,
        first,
        prompt: input.prompt,
        cwd: session.cwd,
        env: input.env,
        backstopMs: input.backstopMs ?? defaults.backstopMs,
        killGraceMs: defaults.killGraceMs,
        maxLineBytes: defaults.maxLineBytes,
        signal: request.signal,
        scrub: this.deps.scrub,
        preToolHook: input.preToolHook,
        sandbox: input.sandbox,
        launchKey: input.launchKey,
        onEvent,
        onSpawn: (pid) => store.setTurnPid(turn.id, pid),
      });
    } catch (error) {
      // A runner bug must still leave a consistent registry: the turn is recorded failed.
      this.failTurn(turn.id, error);
      throw error;
    } finally {
      // The engine is gone (release is given for the process runner only: a TUI keeps its token).
      input.release?.();
    }
    if (outcome.detached) {
      // The engine goes on without us (the daemon is stopping): the turn stays running, to be adopted.
      log.info('turn left running for the next daemon to adopt');
      return { session: store.get(session.id) ?? session, turn, created, outcome };
    }

    let finished: TurnRecord;
    let fresh: SessionRecord;
    let usage: ReturnType<typeof turnUsageFrom>;
    try {
      fresh = store.get(session.id) ?? session;
      usage = turnUsageFrom(events, preset.usageScope, fresh.usageBaseline);
      // Metered at the wire, the turn's figures are what the gateway saw (also when the engine
      // reported none, as when a budget refusal ended it).
      if (turn.meter === 'wire') usage = withWireTotals(usage, this.deps.ledger?.turnTotals(turn.id));
      for (const warning of usage.warnings) log.warn(warning);
      if (usage.nextBaseline) store.setUsageBaseline(session.id, usage.nextBaseline);
      finished = store.finishTurn(turn.id, {
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
    } catch (error) {
      // Never leave a turn `running` with a live owner: that would wedge its session.
      this.failTurn(turn.id, error);
      throw error;
    }
    this.clearWaiting(session.id, log);
    for (const warning of finished.warnings) log.warn(warning);
    log.info('turn ended', {
      status: finished.status,
      endReason: finished.endReason,
      exitCode: finished.exitCode,
      stoppedBy: outcome.stoppedBy,
      metered: finished.usage !== null,
    });
    this.record(input, finished, events, usage, outcome);
    try {
      this.deps.auditTurn?.(store.get(session.id) ?? session, finished, events);
    } catch (error) {
      log.error('could not record the acts of the turn', { error });
    }
    try {
      const now = store.get(session.id);
      if (now) this.deps.afterTurn?.(now);
    } catch (error) {
      log.error('could not check the session after its turn', { error });
    }
    if (outcome.sessionGone)
      await this.markGone(session, outcome.sessionGone.status, outcome.sessionGone.reason);
    return { session: store.get(session.id) ?? fresh, turn: finished, created, outcome };
  }

  /**
   * Is the active session's runner resource still there? One that vanished is marked lost (or
   * ended, when its engine ended it), so the next turn starts a new session instead of failing.
   */
  async checkSession(session: SessionRecord): Promise<SessionRecord> {
    const probe = await this.runner(session.runner).probe?.({
      slug: session.slug,
      tmuxTarget: session.tmuxTarget,
      engineSessionId: session.engineSessionId,
    });
    if (!probe || probe.alive) return session;
    return this.markGone(session, probe.status, probe.reason);
  }

  /** Record a session as lost or ended, and let its runner clean up what it kept for it. */
  private async markGone(
    session: SessionRecord,
    status: 'lost' | 'ended',
    reason: string,
  ): Promise<SessionRecord> {
    const gone = this.deps.store.markGone(session.id, status, reason);
    this.deps.logger.warn(`session ${status}`, { workItem: session.workItem, session: session.id, reason });
    try {
      await this.runner(session.runner).closeSession?.(session);
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

  private payerOf(env: EngineEnv): Payer {
    return this.deps.payer?.(env.credential, env.env) ?? { kind: 'unknown', id: null };
  }

  /** The turn in the usage ledger: its rows, or an unmetered drive saying why nothing measured it. */
  private record(
    input: { session: SessionRecord; payer: Payer; log: Logger },
    turn: TurnRecord,
    events: readonly TurnEvent[],
    usage: ReturnType<typeof turnUsageFrom>,
    outcome: RunOutcome,
  ): void {
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
      const recorded = ledger.recordTurn(
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
  private failTurn(turnId: number, error: unknown): void {
    try {
      this.deps.store.finishTurn(turnId, {
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
      if (this.deps.ledger) {
        recordUnmeteredTurn(
          this.deps.ledger.db,
          turnId,
          new Date().toISOString(),
          `failed before its usage was recorded: ${error instanceof Error ? error.message : String(error)}`,
        );
      }
    } catch (inner) {
      this.deps.logger.error('could not record a failed turn', { turn: turnId, error: inner });
    }
  }

  /**
   * A TUI at a permission prompt waits for a person: the session says so until the engine goes on
   * (any later progress of the turn, or its end).
   */
  private noteAttention(session: SessionRecord, event: TurnEvent, log: Logger): void {
    try {
      if (event.type === 'attention' && event.waiting) {
        this.deps.store.setWaiting(session.id, {
          since: new Date().toISOString(),
          message: event.message ?? 'a permission prompt',
        });
        log.warn('the engine waits for a person', { message: event.message });
      } else if (
        event.type === 'attention' ||
        event.type === 'tool-result' ||
        event.type === 'text' ||
        event.type === 'turn-end'
      ) {
        this.clearWaiting(session.id, log);
      }
    } catch (error) {
      log.error('could not record that the engine waits', { error });
    }
  }

  private clearWaiting(sessionId: string, log: Logger): void {
    try {
      if (this.deps.store.get(sessionId)?.waiting) this.deps.store.setWaiting(sessionId, null);
    } catch (error) {
      log.error('could not record that the engine went on', { error });
    }
  }

  private onSessionEvent(session: SessionRecord, id: string, preassigned: boolean, log: Logger): void {
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
      this.deps.store.markEngineSessionStarted(session.id, id);
    }
  }

  private checkCwd(cwd: string): void {
    let ok = false;
    try {
      ok = statSync(cwd).isDirectory();
    } catch {
      ok = false;
    }
    if (!ok) {
      throw new LoopError('cwd-missing', `working directory does not exist: ${cwd}`, {
        hint: 'Pass an existing directory with --cwd (or close the session if its directory was removed).',
      });
    }
  }
}
