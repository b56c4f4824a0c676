import { randomUUID } from 'node:crypto';
import type { ActStore } from '../acts/audit.js';
import type { Policy } from '../acts/decide.js';
import type { Config } from '../config/schema.js';
import type { BudgetStore } from '../core/ports/budgets.js';
import type { SessionStore } from '../core/ports/sessions.js';
import { buildEngineEnv } from '../engines/env.js';
import type { EnginePreset } from '../engines/preset.js';
import { readBudgetUsage } from '../ledger/budget-hold.js';
import { budgetQueries, overBudget, wireBudgets } from '../ledger/budget-rules.js';
import { type Ledger, NO_WIRE_YET } from '../ledger/ledger.js';
import { sessionPayer } from '../ledger/payer.js';
import type { Logger } from '../log/logger.js';
import { githubCredential, githubUrls, modelCredential } from './credentials.js';
import type { GatewayPorts, GatewaySession, ModelApi, WireAct, WireUsage } from './types.js';

/**
 * The daemon's side of the gateway: policy from the config, acts into the acts table, usage into
 * the ledger, budgets from the ledger, credentials from the config and the daemon's environment.
 */
export interface DaemonPortsDeps {
  store: SessionStore;
  ledger: Ledger;
  acts: ActStore;
  budgets: BudgetStore;
  logger: Logger;
  config: Config;
  engines: Record<string, EnginePreset>;
  /** The daemon's environment: where credentials not written in the config come from. */
  env: Readonly<Record<string, string | undefined>>;
  policyFor(workItem: string): Policy;
  /**
   * The daemon's GitHub client, when it has one: the credential for a repository (`owner/repo`), the
   * App installation's token as the App. Without it, the configured token (github.token,
   * credentials.github, GH_TOKEN, GITHUB_TOKEN) for every repository.
   */
  github?:
    | {
        tokenFor(repoFullName: string): Promise<string | undefined>;
        /** GitHub refused the credential tokenFor gave (401): forget it. */
        tokenRefused?(repoFullName: string): void;
      }
    | undefined;
}

export function createGatewayPorts(deps: DaemonPortsDeps): GatewayPorts {
  const urls = githubUrls(deps.config.gateway.github);
  // Without a client (or before the composition root wires one): one token for every repository.
  const token = deps.config.github.token ?? githubCredential(deps.env, deps.config.credentials)?.value;
  const client = deps.github;
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
      tokenFor: async (session) => (client ? client.tokenFor(`${session.owner}/${session.repo}`) : token),
      tokenRefused: (session) => client?.tokenRefused?.(`${session.owner}/${session.repo}`),
    },
  };
}

async function recordWireAct(deps: DaemonPortsDeps, session: GatewaySession, act: WireAct): Promise<void> {
  const full = await deps.store.get(session.id);
  const turn = await deps.store.currentTurn(session.id);
  if (!full || !turn) {
    deps.logger.warn('a wire act of a session without a turn was not recorded', {
      session: session.id,
      kind: act.kind,
      outcome: act.outcome,
    });
    return;
  }
  const breach = act.verdict === 'deny' && act.outcome !== 'blocked';
  // Numbered after the turn's earlier wire acts by the store; scrubbed by it.
  await deps.acts.saveWire(
    {
      id: turn.id,
      seq: turn.seq,
      sessionId: session.id,
      workItem: session.workItem,
      engine: full.engine,
      runner: full.runner,
      at: new Date().toISOString(),
    },
    {
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
  );
  deps.logger[breach || act.outcome === 'blocked' ? 'warn' : 'info'](
    act.outcome === 'blocked' ? 'act refused at the gateway' : 'act seen at the gateway',
    { workItem: session.workItem, session: session.id, kind: act.kind, outcome: act.outcome, rule: act.rule },
  );
}

async function recordWireUsage(deps: DaemonPortsDeps, session: GatewaySession, u: WireUsage): Promise<void> {
  const full = await deps.store.get(session.id);
  // A request between turns (a person driving the TUI) is the session's, not the last turn's.
  const current = await deps.store.currentTurn(session.id);
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
  // The row, and its turn's waiting drive settled, in one write.
  const added = await deps.ledger.add([entry], NO_WIRE_YET);
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
async function gatewayBudgetCheck(
  deps: DaemonPortsDeps,
  session: GatewaySession,
): Promise<string | undefined> {
  const full = await deps.store.get(session.id);
  if (!full) return 'the session is gone';
  if (full.hold?.kind === 'over-budget') return full.hold.reason;
  const budgets = wireBudgets(deps.config.budgets);
  if (!budgets) return undefined;
  const now = new Date();
  const usage = await readBudgetUsage(deps.budgets, budgetQueries(full, budgets, now));
  const hold = overBudget(full.budgetRaise, budgets, usage, now);
  if (!hold) return undefined;
  if (!full.hold) {
    await deps.store.setHold(full.id, hold);
    deps.logger.warn('session over budget at the gateway: its model requests are refused and it is held', {
      workItem: full.workItem,
      session: full.id,
      reason: hold.reason,
    });
  }
  return hold.reason;
}
