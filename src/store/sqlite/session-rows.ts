import type { CredentialKind } from '../../core/credential.js';
import type { Usage } from '../../core/events.js';
import type {
  BudgetRaise,
  EndReason,
  Meter,
  SessionHold,
  SessionRecord,
  SessionStatus,
  SessionTakeover,
  SessionWaiting,
  TurnGuard,
  TurnRecord,
  TurnStatus,
} from '../../core/ports/sessions.js';

/** The registry's rows as SQLite returns them, and their records. */
export interface SessionRow {
  id: string;
  work_item: string;
  slug: string;
  engine: string;
  runner: string;
  engine_session_id: string | null;
  engine_session_started: number;
  cwd: string;
  status: SessionStatus;
  usage_baseline: string | null;
  credential_kind: CredentialKind | null;
  credential_env: string | null;
  payer_id: string | null;
  hold: string | null;
  budget_raise: string | null;
  tmux_target: string | null;
  waiting: string | null;
  takeover: string | null;
  created_at: string;
  updated_at: string;
  closed_at: string | null;
  close_reason: string | null;
}

export interface TurnRow {
  id: number;
  session_id: string;
  seq: number;
  prompt_digest: string;
  prompt_bytes: number;
  status: TurnStatus;
  end_reason: EndReason | null;
  started_at: string;
  ended_at: string | null;
  exit_code: number | null;
  exit_signal: string | null;
  pid: number | null;
  owner_pid: number | null;
  delivery_id: string | null;
  meter: Meter;
  model: string | null;
  input_tokens: number | null;
  output_tokens: number | null;
  cache_read_tokens: number | null;
  cache_creation_tokens: number | null;
  reasoning_tokens: number | null;
  cost_usd: number | null;
  cost_basis: 'engine-reported' | null;
  error: string | null;
  guard: string | null;
  warnings: string | null;
}

export const toSession = (r: SessionRow): SessionRecord => ({
  id: r.id,
  workItem: r.work_item,
  slug: r.slug,
  engine: r.engine,
  runner: r.runner,
  engineSessionId: r.engine_session_id,
  engineSessionStarted: r.engine_session_started === 1,
  cwd: r.cwd,
  status: r.status,
  usageBaseline: r.usage_baseline ? (JSON.parse(r.usage_baseline) as Usage) : null,
  credentialKind: r.credential_kind,
  credentialEnv: r.credential_env,
  payerId: r.payer_id,
  hold: r.hold ? (JSON.parse(r.hold) as SessionHold) : null,
  budgetRaise: r.budget_raise ? (JSON.parse(r.budget_raise) as BudgetRaise) : {},
  tmuxTarget: r.tmux_target,
  waiting: r.waiting ? (JSON.parse(r.waiting) as SessionWaiting) : null,
  takeover: r.takeover ? (JSON.parse(r.takeover) as SessionTakeover) : null,
  createdAt: r.created_at,
  updatedAt: r.updated_at,
  closedAt: r.closed_at,
  closeReason: r.close_reason,
});

export const toTurn = (r: TurnRow): TurnRecord => ({
  id: r.id,
  sessionId: r.session_id,
  seq: r.seq,
  promptDigest: r.prompt_digest,
  promptBytes: r.prompt_bytes,
  status: r.status,
  endReason: r.end_reason,
  startedAt: r.started_at,
  endedAt: r.ended_at,
  exitCode: r.exit_code,
  exitSignal: r.exit_signal,
  pid: r.pid,
  deliveryId: r.delivery_id,
  meter: r.meter,
  model: r.model,
  usage:
    r.input_tokens === null
      ? null
      : {
          inputTokens: r.input_tokens,
          outputTokens: r.output_tokens ?? 0,
          cacheReadTokens: r.cache_read_tokens ?? 0,
          cacheCreationTokens: r.cache_creation_tokens ?? 0,
          reasoningTokens: r.reasoning_tokens ?? 0,
        },
  costUsd: r.cost_usd,
  costBasis: r.cost_basis,
  error: r.error,
  guard: r.guard ? (JSON.parse(r.guard) as TurnGuard) : null,
  warnings: r.warnings ? (JSON.parse(r.warnings) as string[]) : [],
});
