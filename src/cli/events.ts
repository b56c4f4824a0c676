import type { StatusRow, StatusStore } from '../core/ports/github-status.js';
import type { DeliveryRecord, DeliveryStatus, Inbox } from '../core/ports/inbox.js';
import type { SessionStore } from '../core/ports/sessions.js';
import type { App } from '../main.js';
import { oneLine, table, toJson } from './format.js';
import { EXIT, type Io } from './io.js';

const STATUSES = ['queued', 'running', 'done', 'failed', 'rejected', 'ignored'] as const;

export function parseStatus(value: string): DeliveryStatus {
  if (!(STATUSES as readonly string[]).includes(value))
    throw new Error(`--status is one of ${STATUSES.join(', ')}`);
  return value as DeliveryStatus;
}

/**
 * A delivery as the CLI shows it: a held one's reason reads `held: <why>`, as it always has (the
 * hold is a field of its own in the inbox, `heldReason`).
 */
const shown = (d: DeliveryRecord): DeliveryRecord => ({
  ...d,
  reason: d.heldReason !== null ? `held: ${d.heldReason}` : d.reason,
});

/** The detail column: an error, a reason, or the turn it became — by the session's turn number. */
const describe = (d: DeliveryRecord, seqOf: ReadonlyMap<number, number>): string =>
  d.error
    ? `error: ${oneLine(d.error, 120)}`
    : d.reason
      ? oneLine(d.reason, 120)
      : d.turnId !== null
        ? `turn ${seqOf.get(d.turnId) ?? `#${d.turnId}`}`
        : '';

/** What `events list` and `events show` read: the inbox and the turns deliveries became. */
export interface EventsView {
  inbox: Pick<Inbox, 'list' | 'get' | 'body'>;
  store: Pick<SessionStore, 'turnsForDelivery'>;
  /** What was said on GitHub about each delivery (absent: not shown). */
  githubStatus?: Pick<StatusStore, 'get'> | undefined;
}

/** The session's turn number of each turn the rows became (a person counts a session's turns). */
async function turnNumbers(app: EventsView, rows: readonly DeliveryRecord[]): Promise<Map<number, number>> {
  const seqOf = new Map<number, number>();
  for (const d of rows) {
    if (d.turnId === null) continue;
    for (const t of await app.store.turnsForDelivery(d.id)) seqOf.set(t.id, t.seq);
  }
  return seqOf;
}

/** `the-loop events list`: the inbox, newest first. */
export async function listEvents(
  app: EventsView,
  io: Io,
  options: { status?: DeliveryStatus; workItem?: string; limit?: number; json?: boolean },
): Promise<number> {
  const rows = (
    await app.inbox.list({
      status: options.status,
      workItem: options.workItem,
      limit: options.limit ?? 50,
    })
  ).map(shown);
  if (options.json) {
    io.out(`${toJson(rows, 2)}\n`);
    return EXIT.ok;
  }
  if (rows.length === 0) {
    io.out('The inbox is empty.\n');
    return EXIT.ok;
  }
  const seqOf = await turnNumbers(app, rows);
  io.out(
    table(
      ['RECEIVED', 'DELIVERY', 'EVENT', 'STATUS', 'ROUTE', 'WORK ITEM', 'DETAIL'],
      rows.map((d) => [
        d.receivedAt,
        d.id,
        d.action ? `${d.event}.${d.action}` : d.event,
        d.status,
        d.route ?? '-',
        d.workItem ?? '-',
        describe(d, seqOf),
      ]),
    ),
  );
  return EXIT.ok;
}

export async function showEvent(
  app: EventsView,
  io: Io,
  id: string,
  options: { json?: boolean; body?: boolean },
): Promise<number> {
  const found = await app.inbox.get(id);
  if (!found) {
    io.err(`the-loop: no delivery ${id}\n  → See \`the-loop events list\`.\n`);
    return EXIT.failed;
  }
  const d = shown(found);
  const turns = await app.store.turnsForDelivery(id);
  const body = options.body ? await app.inbox.body(id) : undefined;
  const github = (await app.githubStatus?.get(id)) ?? null;
  if (options.json) {
    // A pruned body (delivery.prunedAt) asked for with --body is null: gone, not empty.
    const withBody = body !== undefined ? { body: JSON.parse(body) } : options.body ? { body: null } : {};
    io.out(`${toJson({ delivery: d, turns, github, ...withBody }, 2)}\n`);
    return EXIT.ok;
  }
  const lines = [
    `Delivery ${d.id}`,
    `  event      ${d.event}${d.action ? `.${d.action}` : ''} (${d.source})`,
    `  received   ${d.receivedAt}`,
    `  status     ${d.status}${d.attempts > 1 ? ` after ${d.attempts} attempts` : ''}`,
    `  route      ${d.route ?? '(not routed yet)'}${d.workItem ? ` → ${d.workItem}` : ''}`,
  ];
  if (d.reason) lines.push(`  reason     ${oneLine(d.reason, 500)}`);
  if (d.error) lines.push(`  error      ${oneLine(d.error, 500)}`);
  for (const t of turns)
    lines.push(
      `  turn       ${t.id}: session ${t.sessionId.slice(0, 8)} turn ${t.seq}, ${t.status} (${t.endReason ?? 'running'})`,
    );
  if (github) lines.push(...githubLines(github));
  if (d.prunedAt)
    lines.push(`  body       pruned at ${d.prunedAt} (inbox.retainDays); its metadata and outcome are kept`);
  else if (d.status === 'failed') lines.push(`  → retry with \`the-loop events retry ${d.id}\``);
  io.out(`${lines.join('\n')}\n`);
  if (body !== undefined) io.out(`${toJson(JSON.parse(body), 2)}\n`);
  return EXIT.ok;
}

export async function retryEvent(app: App, io: Io, id: string, options: { json?: boolean }): Promise<number> {
  const d = shown(await app.inbox.retry(id));
  if (options.json) io.out(`${toJson(d)}\n`);
  else
    io.out(
      `${d.id} queued again at its original place; a running daemon picks it up within dispatch.pollSeconds.\n`,
    );
  return EXIT.ok;
}

/** What was said on GitHub: the comment, the check, the last state, and the last failure. */
function githubLines(g: StatusRow): string[] {
  const said = [
    g.reacted ? 'reacted' : 'no reaction yet',
    g.commentId === null ? 'no comment' : `comment ${g.commentId}`,
    ...(g.checkRunId === null ? [] : [`check run ${g.checkRunId}`]),
    g.phase ? `last said ${g.phase}${g.final ? '' : ' (more to say)'}` : 'nothing said yet',
  ];
  const lines = [`  github     ${said.join(', ')}`];
  if (g.lastError) lines.push(`  github err ${oneLine(g.lastError, 500)}`);
  return lines;
}
