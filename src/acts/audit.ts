import { execFileSync } from 'node:child_process';
import type { TurnEvent } from '../core/events.js';
import type * as Port from '../core/ports/acts.js';
import type { ActOutcome } from '../core/ports/acts.js';
import type {
  BreachHold,
  SessionRecord,
  SessionStore,
  TurnRecord,
  UnaccountedHold,
} from '../core/ports/sessions.js';
import { oneLine } from '../core/text.js';
import type { Logger } from '../log/logger.js';
import { SAFE_GIT_ARGS, safeGitEnv } from '../workspaces/git-runner.js';
import { classifyToolUse } from './classify.js';
import { decide, type Policy } from './policy.js';
import type { ActDetail, ActKind, ClassifiedAct, ClassifyContext } from './types.js';

export type { ActOutcome } from '../core/ports/acts.js';
/** The acts port in this module's vocabulary (its kinds and details). */
export type ActStore = Port.ActStore<ActKind, ActDetail>;
export type ActRecord = Port.ActRecord<ActKind, ActDetail>;
export type ActFilter = Port.ActFilter<ActKind>;
export type NewAct = Port.NewAct<ActKind, ActDetail>;

/**
 * The acts audit of a turn: every consequential act found in its tool uses, settled with the tool's
 * result, and judged against the repository's policy. A denied act that happened (or may have: no
 * result was seen) is a breach; one the PreToolUse hook stopped is `blocked`.
 */

/** Starts the reason the policy hook gives the agent (and Claude puts in the tool result). */
export const POLICY_MARKER = '[the-loop policy]';

export interface SettledAct extends ClassifiedAct {
  seq: number;
  toolUseId: string | null;
  tool: string;
  outcome: ActOutcome;
  verdict: 'allow' | 'deny';
  rule: string;
  reason?: string | undefined;
  breach: boolean;
}

/** The acts of one turn's events, settled and judged. Pure. */
export function actsOfEvents(
  events: readonly TurnEvent[],
  ctx: ClassifyContext,
  policy: Policy,
  /** The tool calls the policy hook refused: its own record, never a tool result's text. */
  refused: ReadonlySet<string> = new Set(),
  /** The gateway served the turn: acts that take effect at the wire are judged there, not here. */
  atWire = false,
): SettledAct[] {
  const results = new Map<string, Extract<TurnEvent, { type: 'tool-result' }>>();
  for (const e of events) if (e.type === 'tool-result' && e.id) results.set(e.id, e);
  const out: SettledAct[] = [];
  for (const e of events) {
    if (e.type !== 'tool-use') continue;
    const result = e.id ? results.get(e.id) : undefined;
    // Blocked only by the hook's own record: an agent can print anything into a tool result.
    const outcome: ActOutcome =
      e.id && refused.has(e.id) && !result?.ok
        ? 'blocked'
        : !result
          ? 'unknown'
          : result.ok
            ? 'succeeded'
            : 'failed';
    for (const act of classifyToolUse({ name: e.name, input: e.input }, ctx)) {
      const v = decide(act, policy);
      out.push({
        ...act,
        seq: out.length + 1,
        toolUseId: e.id || null,
        tool: e.name,
        outcome,
        verdict: v.verdict,
        rule: v.rule,
        reason: v.reason,
        // Denied and not stopped by the hook: a breach. A failed result does not prove the act did
        // not happen (`git push && false`), so a person looks at it too — unless it can only take
        // effect through the gateway, which judged it where it happened (its own record is certain).
        breach: v.verdict === 'deny' && outcome !== 'blocked' && !(atWire && takesEffectAtWire(act)),
      });
    }
  }
  return out;
}

/** Kinds of act that reach GitHub only through git or the API, which the gateway sees. */
const WIRE_KINDS: ReadonlySet<ActKind> = new Set<ActKind>([
  'git-push',
  'git-force-push',
  'git-push-tags',
  'git-delete-branch',
  'pr-merge',
  'gh-api-merge',
  'release-create',
  'repo-delete',
  'protection-change',
  'workflow-dispatch',
]);

/** Whether an act takes effect only through the gateway (a local branch deletion does not). */
export function takesEffectAtWire(act: Pick<ClassifiedAct, 'kind' | 'detail'>): boolean {
  return WIRE_KINDS.has(act.kind) && act.detail.local !== true && act.detail.remoteTracking !== true;
}

/**
 * The hook's refusals the engine itself confirms. The hook's record is a file the agent can write
 * (it runs inside the sandbox); a headless Claude Code lists every refused call in its result
 * (`permission_denials`), which the agent cannot forge — where that list exists, a refusal counts
 * only if it is on it. A TUI has no such list: the hook's record stands alone (docs/security.md).
 */
export function corroborated(
  refused: ReadonlySet<string> | undefined,
  events: readonly TurnEvent[],
): ReadonlySet<string> | undefined {
  if (!refused) return undefined;
  // Only a stream-json result (it has a subtype) carries the list.
  const turnEnd = events.find((e) => e.type === 'turn-end');
  if (turnEnd?.type !== 'turn-end' || turnEnd.subtype === undefined) return refused;
  const denied = new Set(events.flatMap((e) => (e.type === 'tool-refused' && e.id ? [e.id] : [])));
  return new Set([...refused].filter((id) => denied.has(id)));
}

/** Tool inputs that may switch the checked-out branch (git checkout/switch/rebase/branch -m, gh pr checkout…). */
const BRANCH_CHANGE =
  /\b(?:checkout|switch|rebase|worktree)\b|\bbranch\s+(?:-[a-zA-Z]*[mMcC]|--(?:move|copy))\b/;

function mayChangeBranch(events: readonly TurnEvent[]): boolean {
  return events.some((e) => {
    if (e.type !== 'tool-use') return false;
    let text: string;
    try {
      text = JSON.stringify(e.input) ?? '';
    } catch {
      return true;
    }
    return BRANCH_CHANGE.test(text);
  });
}

/** The branch checked out in `cwd`, if git can tell (argv only; no shell). */
export function currentBranchOf(cwd: string): string | undefined {
  try {
    // The agent's repository: plumbing only, with nothing of ours in git's environment.
    const out = execFileSync('git', [...SAFE_GIT_ARGS, '-C', cwd, 'rev-parse', '--abbrev-ref', 'HEAD'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
      timeout: 5000,
      env: safeGitEnv(process.env),
    }).trim();
    return out && out !== 'HEAD' && !/\s/.test(out) ? out : undefined;
  } catch {
    return undefined;
  }
}

export interface AuditDeps {
  /** Where acts are kept. */
  acts: ActStore;
  /** The session's turns (was this its first completed one?). */
  turns: Pick<SessionStore, 'turns'>;
  /** Whether a turn has usage rows. */
  ledger: { turnHasRows(turnId: number): Promise<boolean> };
  /** The tool calls the policy hook refused in a session (see `readRefusals`). */
  refusedIn?: (session: SessionRecord) => ReadonlySet<string>;
  /** Put an `unaccounted` hold on the session (accountability assertion failed). */
  holdUnaccounted?: (sessionId: string, hold: UnaccountedHold) => Promise<void>;
  /** The policy of the repository of a work item. */
  policyFor: (workItem: string) => Policy;
  /** Put a breach hold on the session (its deliveries wait until a person resumes it). */
  holdForBreach: (sessionId: string, hold: BreachHold) => Promise<void>;
  scrub: (text: string) => string;
  logger: Logger;
  /** The branch checked out in a directory (default: asks git). */
  currentBranch?: (cwd: string) => string | undefined;
}

/** Record a finished turn's acts; a breach holds the session. Returns the acts, settled and judged. */
export async function auditTurn(
  deps: AuditDeps,
  session: SessionRecord,
  turn: TurnRecord,
  events: readonly TurnEvent[],
): Promise<SettledAct[]> {
  await checkAccounted(deps, session, turn, events);
  if (!events.some((e) => e.type === 'tool-use')) return [];
  const policy = deps.policyFor(session.workItem);
  const ctx: ClassifyContext = {
    cwd: session.cwd,
    workspace: session.cwd,
    protectedBranches: policy.protectedBranches,
    // The branch now is the branch every act of the turn went to only if nothing in the turn may
    // have switched it; else it is not assumed (a push without a named branch is then judged as
    // going anywhere, protected branches included).
    currentBranch: mayChangeBranch(events) ? undefined : (deps.currentBranch ?? currentBranchOf)(session.cwd),
  };
  // Only inside the sandbox is the gateway the one way out: elsewhere a push to a local path takes effect too.
  const atWire = turn.guard?.gateway.github === true && turn.guard.sandbox === 'bwrap';
  const acts = actsOfEvents(events, ctx, policy, corroborated(deps.refusedIn?.(session), events), atWire);
  if (acts.length === 0) return acts;
  const at = turn.endedAt ?? new Date().toISOString();
  // Scrubbed by the store (AuditDeps.scrub is for what is logged and held here).
  await deps.acts.save(
    {
      id: turn.id,
      seq: turn.seq,
      sessionId: session.id,
      workItem: session.workItem,
      engine: session.engine,
      runner: session.runner,
      at,
    },
    acts,
    'command',
  );
  const log = deps.logger.child({ workItem: session.workItem, session: session.id, turn: turn.seq });
  for (const a of acts) {
    log[a.breach ? 'warn' : 'info'](a.breach ? 'policy breach' : 'act recorded', {
      kind: a.kind,
      outcome: a.outcome,
      verdict: a.verdict,
      rule: a.rule,
    });
  }
  const breaches = acts.filter((a) => a.breach);
  if (breaches.length > 0 && session.status === 'active') {
    const ids = (await deps.acts.list({ turnId: turn.id, breachesOnly: true })).map((a) => a.id);
    const first = breaches[0] as SettledAct;
    await deps.holdForBreach(session.id, {
      kind: 'breach',
      // Outside text, shown on terminals: control characters go.
      reason: `${first.reason ?? first.rule} (${oneLine(deps.scrub(first.command), 200)})${breaches.length > 1 ? ` and ${breaches.length - 1} more` : ''}`,
      acts: ids,
      turnId: turn.id,
      since: at,
    });
  }
  return acts;
}

/**
 * The accountability assertion (invariant 2): a session whose engine declares a structured meter
 * must have produced, by the end of its first completed turn, a usage record and an event stream the
 * act extractor read. If not, it is held `unaccounted` until a person acknowledges it: an engine that
 * says it reports and does not would otherwise run unmeasured and unaudited. (An OTLP-metered TUI
 * turn is not judged here: its telemetry may come after the turn ends.)
 */
export async function checkAccounted(
  deps: Pick<AuditDeps, 'turns' | 'ledger' | 'holdUnaccounted' | 'logger'>,
  session: SessionRecord,
  turn: TurnRecord,
  events: readonly TurnEvent[],
): Promise<UnaccountedHold | undefined> {
  if (!deps.holdUnaccounted || turn.meter === 'none' || turn.status !== 'succeeded') return undefined;
  if (turn.meter === 'otel' && session.runner === 'tmux') return undefined;
  if (session.status !== 'active' || session.hold) return undefined;
  const earlier = (await deps.turns.turns(session.id)).some(
    (t) => t.status === 'succeeded' && t.seq < turn.seq,
  );
  if (earlier) return undefined;
  const missing: string[] = [];
  if (turn.usage === null && !(await deps.ledger.turnHasRows(turn.id)))
    missing.push(`no usage record (its meter is ${turn.meter})`);
  if (!events.some((e) => e.type !== 'diagnostic')) missing.push('no event the act extractor could read');
  if (missing.length === 0) return undefined;
  const hold: UnaccountedHold = {
    kind: 'unaccounted',
    reason: `the first turn of this ${session.engine} session produced ${missing.join(' and ')}`,
    turnId: turn.id,
    since: turn.endedAt ?? new Date().toISOString(),
  };
  await deps.holdUnaccounted(session.id, hold);
  deps.logger.warn('session unaccounted: its deliveries are held until a person acknowledges it', {
    workItem: session.workItem,
    session: session.id,
    reason: hold.reason,
  });
  return hold;
}
