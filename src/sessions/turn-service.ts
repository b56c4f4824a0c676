import { createHash, randomUUID } from 'node:crypto';
import { statSync } from 'node:fs';
import { resolve } from 'node:path';
import { describeError, LoopError } from '../core/errors.js';
import type { SessionRecord, TurnRecord } from '../core/ports/sessions.js';
import { formatWorkItem, parseWorkItem } from '../core/work-item.js';
import { capabilitiesOf } from '../engines/capabilities.js';
import { buildEngineEnv, type EngineEnv } from '../engines/env.js';
import type { EnginePreset } from '../engines/preset.js';
import type { Payer } from '../ledger/payer.js';
import {
  isAdopting,
  isChecking,
  isProbing,
  isSelective,
  isSessionHolding,
  type Runner,
  type RunOutcome,
} from '../runners/runner.js';
import { planTurn } from './plan-turn.js';
import { TurnDriver } from './turn-drive.js';
import { engineFacts, logTurnStart, resolveBinary, withArgs } from './turn-start.js';
import type { TurnPlan, TurnRequest, TurnResult, TurnServiceDeps } from './turn-types.js';

export { turnWarnings } from './turn-drive.js';
export type {
  PreparedEngine,
  PrepareEngineInput,
  TurnPlan,
  TurnRequest,
  TurnResult,
  TurnServiceDeps,
} from './turn-types.js';

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

/** A failure before the turn is begun gives back what preparing it took (the turn's token). */
const releasing =
  (prepared: { release?: (() => Promise<void>) | undefined } | undefined) =>
  async (error: unknown): Promise<never> => {
    await prepared?.release?.().catch(() => {});
    throw error;
  };

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
  private readonly driver: TurnDriver;

  constructor(private readonly deps: TurnServiceDeps) {
    this.driver = new TurnDriver(deps, (name) => this.runner(name));
  }

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

  /**
   * Every check a turn makes before anything is created or started, with no side effects: a bad
   * work item, prompt, engine, runner, cwd or a missing binary is refused here (invariant 7).
   */
  async preflight(request: TurnRequest): Promise<TurnPlan> {
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
    const session = await store.findActive(workItem);
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
      resolveBinary(preset, session.engine, env.env, session.cwd);
      return {
        item,
        workItem,
        promptBytes,
        session,
        slug: session.slug,
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
    const runner = this.runner(runnerName);
    if (isSelective(runner)) runner.supports(preset, engineName);
    const cwd = resolve(request.cwd ?? defaults.cwd);
    this.checkCwd(cwd);
    const env = buildEngineEnv(preset, this.deps.env);
    resolveBinary(preset, engineName, env.env, cwd);
    // A slug another work item holds is refused here, before anything is created (never shared).
    const slug = await store.slugFor(workItem);
    return {
      item,
      workItem,
      promptBytes,
      session: undefined,
      slug,
      preset,
      engineName,
      runnerName,
      cwd,
      env,
    };
  }

  async runTurn(request: TurnRequest): Promise<TurnResult> {
    const plan = await this.preflight(request);
    // Every turn re-checks the runner's tools (tmux removed under a running daemon): a clear error,
    // never a silent fallback to another runner.
    const runner = this.runner(plan.runnerName);
    if (isChecking(runner)) await runner.check();
    const payer = this.payerOf(plan.env);
    const { session, created } = await this.openSession(plan, payer);
    request.onSession?.(session, created);
    return this.beginAndDrive(request, plan, session, created, payer);
  }

  /** The work item's active session, or a new one; its credential brought up to date. */
  private async openSession(
    plan: TurnPlan,
    payer: Payer,
  ): Promise<{ session: SessionRecord; created: boolean }> {
    const { store, logger } = this.deps;
    const { env, preset, workItem } = plan;
    for (const value of env.secretValues) this.deps.addSecret(value);
    let session = plan.session;
    if (session) {
      if ((env.credential?.kind ?? null) !== session.credentialKind || payer.id !== session.payerId) {
        await store.setCredential(
          session.id,
          env.credential?.kind ?? null,
          env.credential?.env ?? null,
          payer.id,
        );
      }
      return { session, created: false };
    }
    const runner = this.runner(plan.runnerName);
    session = await store.create({
      workItem,
      slug: plan.slug,
      engine: plan.engineName,
      runner: plan.runnerName,
      // Pre-assigned id: known before the engine starts (capture engines announce theirs).
      engineSessionId: capabilitiesOf(preset).preassignedId ? randomUUID() : null,
      cwd: plan.cwd,
      credentialKind: env.credential?.kind ?? null,
      credentialEnv: env.credential?.env ?? null,
      payerId: payer.id,
      tmuxTarget: isSessionHolding(runner) ? runner.targetFor(plan.slug) : null,
    });
    logger.info('session created', {
      workItem,
      session: session.id,
      engine: plan.engineName,
      runner: plan.runnerName,
    });
    return { session, created: true };
  }

  /**
   * The policy hook, the gateway's token and the sandbox are prepared before the turn is begun (a
   * failure to prepare them leaves no turn behind); then the turn is begun and driven.
   */
  private async beginAndDrive(
    request: TurnRequest,
    plan: TurnPlan,
    session: SessionRecord,
    created: boolean,
    payer: Payer,
  ): Promise<TurnResult> {
    const { preset, env } = plan;
    const runner = this.runner(session.runner);
    const hook = this.deps.policyHook?.(session, preset);
    const prepared = await this.deps.prepareEngine?.({ session, preset, env: env.env });
    // Several hosts: the conversation another host saved last, restored before the turn is begun.
    const carry = isSessionHolding(runner)
      ? undefined
      : this.deps.carry && {
          session,
          preset,
          env: prepared?.env ?? env.env,
          log: this.deps.logger.child({ workItem: plan.workItem, session: session.id }),
        };
    if (carry && !created) {
      const restore = async () => {
        const lastTurnId = (await this.deps.store.turns(session.id)).findLast(
          (t) => t.status !== 'running',
        )?.id;
        await this.deps.carry?.restore({ ...carry, lastTurnId });
      };
      await restore().catch(releasing(prepared));
    }
    const otelEnv = this.deps.telemetry?.envFor(session.id, preset);
    const planned = planTurn({
      engine: engineFacts(preset),
      runner: { name: runner.name, mode: runner.mode },
      guard: prepared && { ...prepared, wire: prepared.meter === 'wire' },
      policyHook: hook,
      telemetry: otelEnv !== undefined,
    });
    const turn = await this.deps.store.beginTurn(session.id, {
      promptDigest: digest(request.prompt),
      promptBytes: plan.promptBytes,
      meter: planned.meter,
      deliveryId: request.deliveryId,
      guard: prepared?.guard,
    });
    const log = this.deps.logger.child({ workItem: plan.workItem, session: session.id, turn: turn.seq });
    logTurnStart(log, session, plan.promptBytes, prepared, planned);
    const result = await this.driver.drive({
      session,
      turn,
      preset: withArgs(preset, planned.args, planned.interactiveArgs),
      preToolHook: planned.preToolHook,
      sandbox: prepared?.sandbox,
      launchKey: prepared?.launchKey,
      release: planned.releaseAtEnd ? prepared?.release : undefined,
      env: { ...(prepared?.env ?? env.env), ...(planned.telemetry ? otelEnv : undefined) },
      prompt: request.prompt,
      created,
      request,
      log,
      payer,
      start: (input) => runner.runTurn(input),
    });
    if (carry) await this.deps.carry?.save({ ...carry, session: result.session }, result.turn.id);
    return result;
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
    const session = await store.get(turn.sessionId);
    const runner = session ? this.runner(session.runner) : undefined;
    const lost = async (why: string) => {
      await store.markTurnLost(
        turn.id,
        `the process running this turn ended; it could not be adopted: ${why}`,
      );
      logger.warn('could not adopt a running turn', { turn: turn.id, reason: why });
      return undefined;
    };
    if (session?.status !== 'active') return lost(`its session is ${session?.status ?? 'missing'}`);
    if (!runner || !isAdopting(runner)) return lost(`the ${session.runner} runner cannot adopt turns`);
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
    await store.adoptTurn(turn.id);
    const log = logger.child({ workItem: session.workItem, session: session.id, turn: turn.seq });
    request.onSession?.(session, false);
    let refused: string | undefined;
    const result = await this.driver.drive({
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
        // Once the runner has taken it over, it replays the turn from its structured sources: what an
        // earlier process stored of it is replaced then (the driver's onAdopt; kept if refused).
        const outcome = await runner.adoptTurn({ ...input, turnId: turn.id });
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

  /**
   * Is the active session's runner resource still there? One that vanished is marked lost (or
   * ended, when its engine ended it), so the next turn starts a new session instead of failing.
   */
  async checkSession(session: SessionRecord): Promise<SessionRecord> {
    const runner = this.runner(session.runner);
    if (!isProbing(runner)) return session;
    const probe = await runner.probe({
      slug: session.slug,
      tmuxTarget: session.tmuxTarget,
      engineSessionId: session.engineSessionId,
    });
    if (probe.alive) return session;
    return this.driver.markGone(session, probe.status, probe.reason);
  }

  private payerOf(env: EngineEnv): Payer {
    return this.deps.payer?.(env.credential, env.env) ?? { kind: 'unknown', id: null };
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
