import { randomUUID } from 'node:crypto';
import { nextWireSeq, saveActs } from '../acts/act-store.js';
import type { Policy } from '../acts/decide.js';
import type { Config } from '../config/schema.js';
import type { SessionStore } from '../core/ports/sessions.js';
import { buildEngineEnv } from '../engines/env.js';
import type { EnginePreset } from '../engines/preset.js';
import { type Budgets, overBudget } from '../ledger/budget.js';
import type { Ledger } from '../ledger/ledger.js';
import { sessionPayer } from '../ledger/payer.js';
import type { Logger } from '../log/logger.js';
import type { Db } from '../store/db.js';
import { githubCredential, githubUrls, modelCredential } from './credentials.js';
import type { GatewayPorts, GatewaySession, ModelApi, WireAct, WireUsage } from './types.js';

/**
 * The daemon's side of the gateway: policy from the config, acts into the acts table, usage into
 * the ledger, budgets from the ledger, credentials from the config and the daemon's environment.
 */
export interface DaemonPortsDeps {
  db: Db;
  store: SessionStore;
  ledger: Ledger;
  logger: Logger;
  config: Config;
  engines: Record<string, EnginePreset>;
  /** The daemon's environment: where credentials not written in the config come from. */
  env: Readonly<Record<string, string | undefined>>;
  policyFor(workItem: string): Policy;
  scrub(text: string): string;
}

export function createGatewayPorts(deps: DaemonPortsDeps): GatewayPorts {
  const urls = githubUrls(deps.config.gateway.github);
  return {
    logger: deps.logger,
    policyFor: (workItem) => deps.policyFor(workItem),
    recordAct: (session, act) => recordWireAct(deps, session, act),
    recordUsage: (session, usage) => recordWireUsage(deps, session, usage),
    modelRoute: (session) => {
      const preset = Object.hasOwn(deps.engines, session.engine) ? deps.engines[session.engine] : undefined;
      const gw = preset?.gateway;
      if (!preset || !gw) return undefined;
      // What the engine would have used, had it talked to its API itself.
      const engineEnv = buildEngineEnv(preset, deps.env).env;
      const upstream =
        deps.config.gateway.upstreams[gw.api as ModelApi] ??
        (gw.baseUrlEnv ? engineEnv[gw.baseUrlEnv] : undefined) ??
        gw.upstream;
      const held = modelCredential(preset, deps.env, deps.config.credentials);
      return {
        api: gw.api,
        upstream: upstream.replace(/\/+$/, ''),
        credential: held ? { value: held.value, kind: held.kind } : undefined,
      };
    },
    overBudget: (session) => gatewayBudgetCheck(deps, session),
    github: {
      gitUrl: urls.gitUrl,
      apiUrl: urls.apiUrl,
      token: githubCredential(deps.env, deps.config.credentials)?.value,
    },
  };
}

function recordWireAct(deps: DaemonPortsDeps, session: GatewaySession, act: WireAct): void {
  const full = deps.store.get(session.id);
  const turn = deps.store.currentTurn(session.id);
  if (!full || !turn) {
    deps.logger.warn('a wire act of a session without a turn was not recorded', {
      session: session.id,
      kind: act.kind,
      outcome: act.outcome,
    });
    return;
  }
  const breach = act.verdict === 'deny' && act.outcome !== 'blocked';
  saveActs(
    deps.db,
    {
      id: turn.id,
      sessionId: session.id,
      workItem: session.workItem,
      engine: full.engine,
      runner: full.runner,
      at: new Date().toISOString(),
    },
    [
      {
        seq: nextWireSeq(deps.db, turn.id),
        toolUseId: null,
        tool: act.detail.via ?? 'gateway',
        kind: act.kind,
        command: act.command,
        detail: { ...act.detail, ...(act.reason ? { reason: act.reason } : {}) },
        outcome: act.outcome,
        verdict: act.verdict,
        rule: act.rule,
        breach,
      },
    ],
    deps.scrub,
    'wire',
  );
  deps.logger[breach || act.outcome === 'blocked' ? 'warn' : 'info'](
    act.outcome === 'blocked' ? 'act refused at the gateway' : 'act seen at the gateway',
    { workItem: session.workItem, session: session.id, kind: act.kind, outcome: act.outcome, rule: act.rule },
  );
}

function recordWireUsage(deps: DaemonPortsDeps, session: GatewaySession, u: WireUsage): void {
  const full = deps.store.get(session.id);
  // A request between turns (a person driving the TUI) is the session's, not the last turn's.
  const current = deps.store.currentTurn(session.id);
  const turn = current?.status === 'running' ? current : undefined;
  const entry = {
    meter: 'wire' as const,
    // The response's own id; a response cut before it had one still gets its row.
    sourceId: `${u.api}:${u.responseId ?? `no-id-${randomUUID()}`}`,
    at: u.at,
    sessionId: session.id,
    workItem: session.workItem,
    turnId: turn?.id ?? null,
    engine: full?.engine ?? session.engine,
    runner: full?.runner ?? null,
    model: u.model,
    usage: u.usage,
    payer: sessionPayer(full?.credentialKind ?? null, full?.payerId ?? null),
    partial: u.partial,
  };
  const added = deps.ledger.db.transaction(() => {
    const result = deps.ledger.add([entry]);
    if (turn) deps.ledger.wireArrived([turn.id]);
    return result;
  })();
  for (const warning of added.warnings) deps.logger.warn(warning, { session: session.id });
  if (u.partial) {
    deps.logger.warn('a model response ended before its final usage: recorded as far as it got', {
      session: session.id,
      api: u.api,
    });
  }
}

/**
 * Budgets at the wire: a session (or its work item) at a token or dollar ceiling gets no more model
 * requests, and is held. Turn ceilings are the dispatcher's (the running turn is already counted).
 */
function gatewayBudgetCheck(deps: DaemonPortsDeps, session: GatewaySession): string | undefined {
  const full = deps.store.get(session.id);
  if (!full) return 'the session is gone';
  if (full.hold?.kind === 'over-budget') return full.hold.reason;
  const { session: s, workItem: w } = deps.config.budgets;
  const budgets: Budgets = {
    session: { maxTokens: s.maxTokens, maxUsd: s.maxUsd },
    workItem: { maxTokens: w.maxTokens, maxUsd: w.maxUsd },
  };
  if (
    !budgets.session.maxTokens &&
    !budgets.session.maxUsd &&
    !budgets.workItem.maxTokens &&
    !budgets.workItem.maxUsd
  ) {
    return undefined;
  }
  const hold = overBudget(deps.db, full, budgets);
  if (!hold) return undefined;
  if (!full.hold) {
    deps.store.setHold(full.id, hold);
    deps.logger.warn('session over budget at the gateway: its model requests are refused and it is held', {
      workItem: full.workItem,
      session: full.id,
      reason: hold.reason,
    });
  }
  return hold.reason;
}
