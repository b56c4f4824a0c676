import type { ReactionTarget } from '../../core/ports/github.js';
import type {
  AnswerTarget,
  DeliveryRecord,
  DeliveryStatus,
  RouteAction,
  RoutedDelivery,
  RoutedTurn,
} from '../../core/ports/inbox.js';

/** A `deliveries` row as the inbox reads it (never the body or the plan: those are read by id). */
export interface Row {
  seq: number;
  id: string;
  source: 'github' | 'manual';
  event: string;
  action: string | null;
  received_at: string;
  status: DeliveryStatus;
  route: RouteAction | null;
  work_item: string | null;
  reason: string | null;
  held_reason: string | null;
  attempts: number;
  turn_id: number | null;
  error: string | null;
  updated_at: string;
  pruned_at: string | null;
}

export const COLUMNS =
  'seq, id, source, event, action, received_at, status, route, work_item, reason, held_reason, attempts, turn_id, error, updated_at, pruned_at';

export const toRecord = (r: Row): DeliveryRecord => ({
  seq: r.seq,
  id: r.id,
  source: r.source,
  event: r.event,
  action: r.action,
  receivedAt: r.received_at,
  status: r.status,
  route: r.route,
  workItem: r.work_item,
  reason: r.reason,
  heldReason: r.held_reason,
  attempts: r.attempts,
  turnId: r.turn_id,
  error: r.error,
  updatedAt: r.updated_at,
  prunedAt: r.pruned_at,
});

/** ignore and reject are final: the delivery is settled when routed; the others wait in the queue. */
export const statusOf = (action: RouteAction): DeliveryStatus | null =>
  action === 'ignore' ? 'ignored' : action === 'reject' ? 'rejected' : null;

/**
 * The `plan` column: what the routed result holds beyond its action, work item and reason (the
 * columns of their own). A start or deliver's turn plan (the rendered prompt…), a close's repository;
 * nothing for ignore and reject.
 */
export function planOf(routed: RoutedDelivery): string | null {
  if (routed.action === 'start' || routed.action === 'deliver') {
    const { action: _action, workItem: _workItem, ...plan } = routed;
    return JSON.stringify(plan);
  }
  return routed.action === 'close' ? JSON.stringify({ repo: routed.repo }) : null;
}

/** A turn plan's string fields, in the order the router writes them (workspace after repoPath). */
const PLAN_STRINGS = ['repo', 'prompt', 'engine', 'runner', 'repoPath', 'author', 'trigger'] as const;

/**
 * A stored turn plan's fields, checked by hand (no schema library on the inbox's read path: the
 * commands that list deliveries start without loading one); held to a zod schema by a test. The
 * fields it knows, in the router's order; other keys dropped.
 */
export function turnPlanOf(json: unknown): Omit<RoutedTurn, 'action' | 'workItem'> | undefined {
  if (!json || typeof json !== 'object' || Array.isArray(json)) return undefined;
  const o = json as Record<string, unknown>;
  const { repo, prompt, engine, runner, repoPath, workspace, author, trigger, routedUnder } = o;
  if (PLAN_STRINGS.some((key) => typeof o[key] !== 'string')) return undefined;
  if (workspace !== 'checkout' && workspace !== 'worktree') return undefined;
  if (routedUnder !== undefined && typeof routedUnder !== 'string') return undefined;
  const plan = { repo, prompt, engine, runner, repoPath, workspace, author, trigger } as Omit<
    RoutedTurn,
    'action' | 'workItem'
  >;
  if (Object.hasOwn(o, 'routedUnder')) plan.routedUnder = routedUnder as string | undefined;
  const answer = answerTargetOf(o.answer);
  if (answer) plan.answer = answer;
  return plan;
}

const positiveInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v > 0;

/** A stored plan's answer target (issue 18), checked field by field; undefined when it is not one. */
export function answerTargetOf(v: unknown): AnswerTarget | undefined {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const o = v as Record<string, unknown>;
  if (typeof o.repository !== 'string' || !positiveInt(o.number) || typeof o.pull !== 'boolean')
    return undefined;
  if (o.installationId !== undefined && !positiveInt(o.installationId)) return undefined;
  if (o.headSha !== undefined && (typeof o.headSha !== 'string' || !/^[0-9a-f]{40,64}$/.test(o.headSha)))
    return undefined;
  const r = o.react as Record<string, unknown> | undefined;
  let react: ReactionTarget | undefined;
  if (r !== undefined) {
    if (!r || typeof r !== 'object') return undefined;
    if (r.kind === 'issue' && positiveInt(r.number)) react = { kind: 'issue', number: r.number };
    else if ((r.kind === 'issue-comment' || r.kind === 'review-comment') && positiveInt(r.id))
      react = { kind: r.kind, id: r.id };
    else return undefined;
  }
  return {
    repository: o.repository,
    number: o.number,
    pull: o.pull,
    react,
    installationId: o.installationId as number | undefined,
    headSha: o.headSha as string | undefined,
  };
}

/** A stored turn plan back as the router returned it; undefined when the column does not hold one. */
export function parsePlan(
  action: 'start' | 'deliver',
  workItem: string,
  plan: string,
): RoutedTurn | undefined {
  let json: unknown;
  try {
    json = JSON.parse(plan);
  } catch {
    return undefined;
  }
  const fields = turnPlanOf(json);
  return fields ? { action, workItem, ...fields } : undefined;
}

/**
 * JSON from outside (a payload, a plan with a prompt in it) that holds a secret — an agent that
 * posted a key to GitHub gets it back in the webhook — is stored with it masked in its string values,
 * re-serialized so that it stays the JSON it was; JSON without one is stored byte for byte. (The
 * signature was checked on the bytes as they came.)
 */
export function scrubJson(text: string, scrub: ((text: string) => string) | undefined): string {
  if (!scrub || scrub(text) === text) return text;
  try {
    return JSON.stringify(
      JSON.parse(text, (_key, value) => (typeof value === 'string' ? scrub(value) : value)),
    );
  } catch {
    return scrub(text);
  }
}

/** How a store masks outside text: `scrub`, and `mayHold`, a check of bytes (see SecretScrubber). */
export interface Masking {
  scrub?: ((text: string) => string) | undefined;
  /** False: `text`, the decoding of these UTF-8 bytes, holds nothing `scrub` masks. */
  mayHold?: ((bytes: Uint8Array, text: string) => boolean) | undefined;
}

/**
 * A payload as the `body` column holds it. Bytes are stored as they came (a BLOB: not re-encoded,
 * decoded only when read) unless their text holds a secret: then the masked JSON, as text — as a
 * text payload always is. `text` is the bytes decoded as UTF-8 when the caller has it already.
 * Bytes that `mayHold` clears are stored as they are without a scrub of their text.
 */
export function storedBody(
  body: string | Uint8Array,
  text: string | undefined,
  masking: Masking,
): string | Buffer {
  const { scrub } = masking;
  if (typeof body === 'string') return scrubJson(body, scrub);
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (!scrub) return bytes;
  const decoded = text ?? bytes.toString('utf8');
  if (masking.mayHold?.(bytes, decoded) === false) return bytes;
  const scrubbed = scrubJson(decoded, scrub);
  return scrubbed === decoded ? bytes : scrubbed;
}

/**
 * A stored payload as text: a BLOB (bytes as received) decoded as UTF-8 — an invalid sequence reads
 * as U+FFFD, as it did when ingress decoded a body before storing it — and text as it is.
 */
export const bodyText = (stored: string | Uint8Array): string =>
  typeof stored === 'string'
    ? stored
    : Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength).toString('utf8');
