/**
 * The chaos test's verdicts, read from PostgreSQL directly: each check returns what it found wrong
 * (an empty list: it holds), so a failing run says every broken rule at once, with examples.
 */
import { existsSync, readFileSync } from 'node:fs';
import type pg from 'pg';
import type { Plan, TrafficResult } from './chaos-traffic.js';
import { workItemOf } from './chaos-traffic.js';

export interface TurnRow {
  id: number;
  session_id: string;
  work_item: string;
  seq: number;
  status: string;
  end_reason: string | null;
  started_at: string;
  ended_at: string | null;
  owner_pid: number | null;
  delivery_id: string | null;
  host_id?: string | null;
  epoch?: number | null;
}

export interface DeliveryRow {
  seq: number;
  id: string;
  status: string;
  route: string | null;
  work_item: string | null;
  turn_id: number | null;
}

export interface Snapshot {
  turns: TurnRow[];
  deliveries: DeliveryRow[];
  leases: Array<{ work_item: string; host_id: string; epoch: number; ended: boolean }>;
  /** Whether turns carry host_id and epoch (the multi-host schema). */
  fenced: boolean;
}

async function hasColumn(client: pg.Client, table: string, column: string): Promise<boolean> {
  const r = await client.query(
    'SELECT 1 FROM information_schema.columns WHERE table_name = $1 AND column_name = $2',
    [table, column],
  );
  return (r.rowCount ?? 0) > 0;
}

export async function snapshot(client: pg.Client): Promise<Snapshot> {
  const fenced = (await hasColumn(client, 'turns', 'epoch')) && (await hasColumn(client, 'turns', 'host_id'));
  const turns = await client.query<TurnRow>(
    `SELECT t.id::int, t.session_id, s.work_item, t.seq::int, t.status, t.end_reason, t.started_at, t.ended_at,
            t.owner_pid::int, t.delivery_id${fenced ? ', t.host_id, t.epoch::int' : ''}
       FROM turns t JOIN sessions s ON s.id = t.session_id ORDER BY t.id`,
  );
  const deliveries = await client.query<DeliveryRow>(
    'SELECT seq::int, id, status, route, work_item, turn_id::int FROM deliveries ORDER BY seq',
  );
  const hasLeases = await hasColumn(client, 'leases', 'epoch');
  const leases = hasLeases
    ? (await client.query('SELECT work_item, host_id, epoch::int, ended FROM leases')).rows
    : [];
  return { turns: turns.rows, deliveries: deliveries.rows, leases, fenced };
}

const sample = (list: string[], n = 8) =>
  list.length <= n ? list : [...list.slice(0, n), `… and ${list.length - n} more`];

const groupBy = <T, K>(items: T[], key: (t: T) => K): Map<K, T[]> => {
  const map = new Map<K, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = map.get(k) ?? [];
    list.push(item);
    map.set(k, list);
  }
  return map;
};

/** Every valid delivery stored once; forged ones never; each answered once 202 at most, then 'duplicate'. */
export function storedOnce(s: Snapshot, plan: Plan, traffic: TrafficResult): string[] {
  const wrong: string[] = [];
  const stored = new Map(s.deliveries.map((d) => [d.id, d]));
  if (stored.size !== s.deliveries.length)
    wrong.push(`${s.deliveries.length - stored.size} ids stored twice`);
  const planned = new Set(plan.unique.map((d) => d.id));
  for (const d of plan.unique) if (!stored.has(d.id)) wrong.push(`delivery ${d.id} (#${d.issue}) not stored`);
  for (const d of s.deliveries) if (!planned.has(d.id)) wrong.push(`unexpected delivery ${d.id} stored`);
  for (const id of traffic.forged) if (stored.has(id)) wrong.push(`forged delivery ${id} stored`);
  for (const status of traffic.badSignatureAnswers)
    if (status !== 401) wrong.push(`forged delivery answered ${status}`);
  for (const d of plan.unique) {
    const answers = traffic.answers.get(d.id) ?? [];
    const accepted = answers.filter((a) => a.status === 202).length;
    if (accepted > 1) wrong.push(`delivery ${d.id} answered 202 ${accepted} times`);
    const other = answers.filter((a) => a.status === 200 && a.text !== 'duplicate');
    if (other.length > 0) wrong.push(`delivery ${d.id} answered 200 ${JSON.stringify(other[0]?.text)}`);
  }
  return sample(wrong);
}

/** Routed as planned (mentions run a turn, plain comments are ignored), and every delivery settled. */
export function routedAndSettled(s: Snapshot, plan: Plan): string[] {
  const wrong: string[] = [];
  const byId = new Map(s.deliveries.map((d) => [d.id, d]));
  for (const p of plan.unique) {
    const d = byId.get(p.id);
    if (!d) continue;
    const expected = p.runnable ? ['start', 'deliver'] : ['ignore'];
    if (!expected.includes(d.route ?? '')) wrong.push(`delivery ${p.id} routed ${d.route}`);
    if (d.work_item !== workItemOf(p.issue)) wrong.push(`delivery ${p.id} on ${d.work_item}`);
  }
  for (const d of s.deliveries)
    if (!['done', 'failed', 'ignored'].includes(d.status))
      wrong.push(`delivery ${d.id} (${d.work_item}) is ${d.status}`);
  for (const t of s.turns)
    if (t.status === 'running') wrong.push(`turn ${t.id} (${t.work_item}) still running`);
  return sample(wrong);
}

/** Exactly one turn per runnable delivery, and the delivery records that turn and its outcome. */
export function oneTurnEach(s: Snapshot): string[] {
  const wrong: string[] = [];
  const turnsOf = groupBy(s.turns, (t) => t.delivery_id);
  for (const t of turnsOf.get(null) ?? []) wrong.push(`turn ${t.id} (${t.work_item}) has no delivery`);
  for (const d of s.deliveries) {
    if (d.route !== 'start' && d.route !== 'deliver') continue;
    const turns = turnsOf.get(d.id) ?? [];
    if (turns.length !== 1) {
      const what = turns.map((t) => `${t.id}:${t.status}/${t.end_reason}`).join(', ');
      wrong.push(`delivery ${d.id} (${d.work_item}, ${d.status}) has ${turns.length} turns [${what}]`);
      continue;
    }
    const turn = turns[0] as TurnRow;
    const expected = turn.status === 'succeeded' ? 'done' : 'failed';
    if (d.turn_id !== turn.id || d.status !== expected)
      wrong.push(
        `delivery ${d.id} is ${d.status} (turn_id ${d.turn_id}) but its turn ${turn.id} ${turn.status}`,
      );
  }
  return sample(wrong);
}

/** Per work item, turns ran in arrival order, which is the order each work item's deliveries were sent. */
export function orderKept(s: Snapshot, plan: Plan, traffic: TrafficResult): string[] {
  const wrong: string[] = [];
  const delivery = new Map(s.deliveries.map((d) => [d.id, d]));
  const runnable = new Set(plan.unique.filter((d) => d.runnable).map((d) => d.id));
  for (const [workItem, turns] of groupBy(s.turns, (t) => t.work_item)) {
    let last = -1;
    for (const t of turns) {
      const seq = delivery.get(t.delivery_id ?? '')?.seq ?? -1;
      if (seq <= last) wrong.push(`${workItem}: turn ${t.id} runs delivery #${seq} after #${last}`);
      last = Math.max(last, seq);
    }
    const bySession = groupBy(turns, (t) => t.session_id);
    for (const [session, list] of bySession)
      for (let i = 1; i < list.length; i++)
        if ((list[i] as TurnRow).seq <= (list[i - 1] as TurnRow).seq)
          wrong.push(`${workItem}: session ${session} seq out of order`);
  }
  for (const [issue, sent] of traffic.acknowledged) {
    const workItem = workItemOf(issue);
    const arrived = s.deliveries.filter((d) => d.work_item === workItem).map((d) => d.id);
    if (arrived.join() !== sent.join()) wrong.push(`${workItem}: stored in another order than sent`);
    const ran = s.turns.filter((t) => t.work_item === workItem).map((t) => t.delivery_id);
    const expected = sent.filter((id) => runnable.has(id));
    if (ran.join() !== expected.join()) {
      const missing = expected.filter((id) => !ran.includes(id)).length;
      wrong.push(
        `${workItem}: ${ran.length} turns for ${expected.length} runnable deliveries (${missing} without a turn)`,
      );
    }
  }
  return sample(wrong);
}

/** The turns running on the killed host: interrupted (failed/interrupted), their delivery failed, never re-run. */
export function killedTurnsInterrupted(
  s: Snapshot,
  killedTurnIds: number[],
  killedAt: string,
  killedPid: number,
): string[] {
  const wrong: string[] = [];
  if (killedTurnIds.length === 0) wrong.push('no turn was running on the killed host when it was killed');
  const byId = new Map(s.turns.map((t) => [t.id, t]));
  for (const id of killedTurnIds) {
    const t = byId.get(id);
    if (!t) {
      wrong.push(`turn ${id} is gone`);
      continue;
    }
    if (t.status !== 'failed' || t.end_reason !== 'interrupted')
      wrong.push(
        `killed host's turn ${id} (${t.work_item}) is ${t.status}/${t.end_reason}, not failed/interrupted`,
      );
    const again = s.turns.filter((o) => o.delivery_id === t.delivery_id && o.id !== t.id);
    if (again.length > 0)
      wrong.push(`killed host's turn ${id}: its delivery ran again (turns ${again.map((o) => o.id)})`);
    const d = s.deliveries.find((x) => x.id === t.delivery_id);
    if (d?.status !== 'failed')
      wrong.push(`killed host's turn ${id}: its delivery is ${d?.status}, not failed`);
  }
  for (const t of s.turns)
    if (t.owner_pid === killedPid && t.started_at > killedAt)
      wrong.push(`turn ${t.id} started by the killed host after its death`);
  return sample(wrong);
}

/**
 * No stale-epoch write applied. A lease's epoch grows each time the lease changes hands, so:
 * every turn names the host and epoch it ran under; one epoch of a work item belongs to one host;
 * a work item's turns never go back to an older epoch (a turn begun under a lost lease after the
 * new holder's would); no turn is newer than the work item's lease (epoch ≤ the lease's, and one
 * at the lease's epoch is the holder's); and each turn's host is the host of the process that ran it.
 */
export function noStaleEpoch(s: Snapshot, hostOfPid: Map<number, string>): string[] {
  if (!s.fenced) return ['turns have no host_id/epoch columns (the multi-host schema is not there)'];
  const wrong: string[] = [];
  const lease = new Map(s.leases.map((l) => [l.work_item, l]));
  for (const [workItem, turns] of groupBy(s.turns, (t) => t.work_item)) {
    const holderAt = new Map<number, string>();
    let last = 0;
    for (const t of turns) {
      if (t.epoch == null || t.host_id == null) {
        wrong.push(`turn ${t.id} (${workItem}) has no host/epoch`);
        continue;
      }
      const holder = holderAt.get(t.epoch);
      if (holder !== undefined && holder !== t.host_id)
        wrong.push(`${workItem}: epoch ${t.epoch} has turns of ${holder} and ${t.host_id}`);
      holderAt.set(t.epoch, t.host_id);
      if (t.epoch < last)
        wrong.push(`${workItem}: turn ${t.id} at epoch ${t.epoch} after a turn at epoch ${last}`);
      last = Math.max(last, t.epoch);
      const l = lease.get(workItem);
      if (!l) wrong.push(`${workItem}: turn ${t.id} but no lease`);
      else if (t.epoch > l.epoch || (t.epoch === l.epoch && t.host_id !== l.host_id))
        wrong.push(
          `${workItem}: turn ${t.id} (${t.host_id}@${t.epoch}) beyond its lease (${l.host_id}@${l.epoch})`,
        );
      const ran = t.owner_pid == null ? undefined : hostOfPid.get(t.owner_pid);
      if (ran !== undefined && ran !== t.host_id)
        wrong.push(`turn ${t.id} ran on ${ran} but says ${t.host_id}`);
    }
  }
  return sample(wrong);
}

/** For the log: how long turns took and waited (medians and 95th percentiles, ms), per host. */
export async function timings(client: pg.Client): Promise<string> {
  const r = await client.query(
    `SELECT t.owner_pid::int AS pid,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM t.ended_at::timestamptz - t.started_at::timestamptz)) * 1000 AS run_p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM t.ended_at::timestamptz - t.started_at::timestamptz)) * 1000 AS run_p95,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM t.started_at::timestamptz - d.received_at::timestamptz)) * 1000 AS wait_p50,
            count(*)::int AS n
       FROM turns t JOIN deliveries d ON d.id = t.delivery_id WHERE t.ended_at IS NOT NULL GROUP BY t.owner_pid`,
  );
  return r.rows
    .map(
      (x: { pid: number; run_p50: number; run_p95: number; wait_p50: number; n: number }) =>
        `pid ${x.pid}: ${x.n} turns, run p50 ${Math.round(x.run_p50)} ms p95 ${Math.round(x.run_p95)} ms, waited p50 ${Math.round(x.wait_p50)} ms`,
    )
    .join('; ');
}

/**
 * For the log, when something is left running: each such delivery with its work item's lease, and
 * what the hosts' logs say about it.
 */
export async function diagnoseStuck(
  client: pg.Client,
  logs: Array<{ host: string; path: string }>,
): Promise<string> {
  const r = await client.query(
    `SELECT d.id, d.work_item, d.attempts::int, d.updated_at, l.host_id, l.epoch::int, l.ended, l.expires_at
       FROM deliveries d LEFT JOIN leases l ON l.work_item = d.work_item
      WHERE d.status = 'running' ORDER BY d.seq LIMIT 5`,
  );
  const lines: string[] = [];
  for (const row of r.rows as Array<Record<string, unknown>>) {
    lines.push(`running delivery ${JSON.stringify(row)}`);
    for (const { host, path } of logs) {
      const text = existsSync(path) ? readFileSync(path, 'utf8') : '';
      for (const line of text
        .split('\n')
        .filter((l) => l.includes(String(row.id)))
        .slice(0, 6))
        lines.push(`  ${host}: ${line.slice(0, 400)}`);
    }
  }
  return lines.join('\n');
}
