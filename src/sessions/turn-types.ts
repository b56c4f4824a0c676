import type { TurnEvent } from '../core/events.js';
import type { SessionRecord, SessionStore, TurnGuard, TurnRecord } from '../core/ports/sessions.js';
import type { WorkItem } from '../core/work-item.js';
import type { EngineEnv } from '../engines/env.js';
import type { EnginePreset } from '../engines/preset.js';
import type { Ledger } from '../ledger/ledger.js';
import type { Payer } from '../ledger/payer.js';
import type { Logger } from '../log/logger.js';
import type { Runner, RunOutcome, RunTurnInput } from '../runners/runner.js';
import type { SessionCarry } from './carry.js';

/** What a turn is asked for, what it plans, what it gives back, and what the turn service needs. */
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
  /** The session's slug, or the one a new session takes (checked against other work items). */
  slug: string;
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
  afterTurn?: ((session: SessionRecord) => Promise<void> | void) | undefined;
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
  /** The acts audit: the turn's consequential acts, recorded (a breach holds the session); awaited. */
  auditTurn?:
    | ((session: SessionRecord, turn: TurnRecord, events: readonly TurnEvent[]) => unknown)
    | undefined;
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
  prepareEngine?: ((input: PrepareEngineInput) => Promise<PreparedEngine> | PreparedEngine) | undefined;
  /**
   * Several hosts sharing a store: a process-runner session's conversation files, saved to the
   * store after every turn and restored before a turn on the host that runs it (sessions/carry.ts).
   */
  carry?: Pick<SessionCarry, 'save' | 'restore'> | undefined;
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
  release?: (() => Promise<void>) | undefined;
  /** Said at the start of the turn (no sandbox, a credential the gateway cannot hold…). */
  notes: string[];
}
