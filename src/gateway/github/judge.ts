import { decide, type Policy, type Verdict } from '../../acts/decide.js';
import type { ActDetail } from '../../acts/types.js';
import type { WireAct, WireOutcome } from '../types.js';
import type { Target } from './graphql-access.js';
import { type LookupContext, lookUp } from './lookup.js';
import {
  type ApiAct,
  branchUnknown,
  commandText,
  isSessionRepo,
  type SessionRepo,
  withFound,
} from './wire-act.js';

/**
 * The policy applied to GitHub API acts, and their outcome read from the upstream's answer. The
 * session's token serves its own repository: an act that reaches another one is refused, and so is
 * one whose repository could not be verified (a node id the lookup could not place). Lookups are
 * made only when the verdict depends on them.
 */

export interface Judged {
  act: ApiAct;
  verdict: Verdict;
}

/** The verdict on one act, once its lookup (if any) is answered. Pure. */
export function verdictOf(act: ApiAct, policy: Policy, session: SessionRepo): Verdict {
  const rule = policy.rules[act.kind] ?? 'allow';
  const repo = act.detail.repo;
  const mine = `${session.owner}/${session.repo}`;
  if (repo !== undefined && !isSessionRepo(repo, session)) {
    return {
      verdict: 'deny',
      rule: `${act.kind}: other repository`,
      reason: `this session may act on ${mine} only, not on ${repo}`,
    };
  }
  if (act.repoUnverified === true && rule !== 'deny') {
    return {
      verdict: 'deny',
      rule: `${act.kind}: unverified repository`,
      reason: `the repository this ${act.detail.mutation ?? act.kind} reaches could not be verified as ${mine}`,
    };
  }
  return decide(act, policy);
}

/** Whether the upstream must be asked before this act can be judged. */
function needsLookup(act: ApiAct, policy: Policy, session: SessionRepo): boolean {
  if (!act.lookup) return false;
  const rule = policy.rules[act.kind] ?? 'allow';
  if (rule === 'deny') return false;
  if (act.detail.repo !== undefined && !isSessionRepo(act.detail.repo, session)) return false;
  return act.repoUnverified === true || (rule === 'deny-protected' && branchUnknown(act));
}

export async function judgeActs(acts: ApiAct[], policy: Policy, ctx: LookupContext): Promise<Judged[]> {
  return Promise.all(
    acts.map(async (act) => {
      const placed =
        act.lookup && needsLookup(act, policy, ctx.session)
          ? withFound(act, await lookUp(act.lookup, ctx))
          : act;
      return { act: placed, verdict: verdictOf(placed, policy, ctx.session) };
    }),
  );
}

/** The act as recorded: what was asked, the verdict, the outcome. */
export function wireAct(j: Judged, outcome: WireOutcome, upstream?: string, reason?: string): WireAct {
  const { kind, command, detail } = j.act;
  return {
    kind,
    command,
    detail: upstream === undefined ? detail : { ...detail, upstream },
    outcome,
    verdict: j.verdict.verdict,
    rule: j.verdict.rule,
    reason: reason ?? j.verdict.reason,
  };
}

/**
 * A request the gateway refuses before any policy applies (a write not on the allow-lists, a
 * mutation of another repository's node), recorded so that `the-loop acts` shows the attempt.
 */
export function refusedAct(command: string, detail: ActDetail, rule: string, reason: string): WireAct {
  return {
    kind: 'unknown-gh-act',
    command: commandText(command),
    detail,
    outcome: 'blocked',
    verdict: 'deny',
    rule,
    reason,
  };
}

/** Why the targets of allowed mutations may not be written; undefined: all are the session's. */
export async function targetRefusal(
  targets: readonly Target[],
  ctx: LookupContext,
): Promise<{ target: Target; rule: string; reason: string } | undefined> {
  const ids = [...new Set(targets.map((t) => t.id))];
  const found = await Promise.all(ids.map((id) => lookUp({ kind: 'node', id, type: 'RepositoryNode' }, ctx)));
  const mine = `${ctx.session.owner}/${ctx.session.repo}`;
  for (const target of targets) {
    const repo = found[ids.indexOf(target.id)]?.repo;
    if (repo === undefined) {
      const reason = `the repository ${target.mutation} writes to could not be verified as ${mine}`;
      return { target, rule: 'gateway: unverified repository', reason };
    }
    if (!isSessionRepo(repo, ctx.session)) {
      const reason = `this session may write to ${mine} only, not to ${repo}`;
      return { target, rule: 'gateway: other repository', reason };
    }
  }
  return undefined;
}

export interface Settled {
  outcome: WireOutcome;
  upstream: string;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A REST act succeeded when the upstream said 2xx. */
export const restOutcome = (status: number): Settled => ({
  outcome: status >= 200 && status < 300 ? 'succeeded' : 'failed',
  upstream: String(status),
});

/**
 * A GraphQL act succeeded when the answer is HTTP 200, its response key holds data, and no error's
 * path starts at that key. An answer we could not read leaves it unknown. Pure.
 */
export function graphqlOutcome(act: ApiAct, status: number, text: string | undefined): Settled {
  if (status !== 200) return { outcome: 'failed', upstream: String(status) };
  if (text === undefined) return { outcome: 'unknown', upstream: `${status}, answer not read` };
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { outcome: 'unknown', upstream: `${status}, answer not JSON` };
  }
  const where = act.result ?? { index: null, key: act.detail.mutation ?? '' };
  const entry = where.index !== null && Array.isArray(json) ? json[where.index] : json;
  if (!isRecord(entry)) return { outcome: 'failed', upstream: `${status}, no answer` };
  const value = isRecord(entry.data) ? entry.data[where.key] : undefined;
  const errors = Array.isArray(entry.errors) ? entry.errors.filter(isRecord) : [];
  const mine = errors.find((e) => Array.isArray(e.path) && e.path[0] === where.key);
  const first = mine ?? (value === undefined || value === null ? errors[0] : undefined);
  if (value !== undefined && value !== null && !mine)
    return { outcome: 'succeeded', upstream: String(status) };
  const said = first ? String(first.type ?? first.message ?? '').slice(0, 160) : 'no data';
  return { outcome: 'failed', upstream: `${status}, ${said.replace(/[\x00-\x1f\x7f]/g, ' ')}` };
}
