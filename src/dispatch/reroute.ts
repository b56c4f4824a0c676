import { describeError, LoopError } from '../core/errors.js';
import type { Claim, DeliveryRecord, RoutedDelivery, RoutedTurn } from '../core/ports/inbox.js';
import { lazily } from '../os/lazy-zod.js';
import type { DispatcherDeps } from './dispatcher-deps.js';
import { type ManualBody, manualPlan } from './manual-plan.js';

/**
 * The dispatcher's routing of stored rows, for the two cases where a delivery is routed after its
 * arrival: a row an older version stored without its route or plan (routed once, when first seen,
 * and stored), and a plan made under another routing config (routed once more when it runs).
 */
type Deps = Pick<DispatcherDeps, 'inbox' | 'logger' | 'routeLegacy' | 'routingDigest'>;

/** The body of a manual delivery an older version stored unrouted: built (and zod loaded) when one is read. */
export const manualBodySchema = lazily((z) =>
  z.object({
    workItem: z.string(),
    prompt: z.string(),
    engine: z.string().optional(),
    runner: z.string().optional(),
    cwd: z.string().optional(),
  }),
);

/**
 * Rows an older version stored unrouted are routed once, now, and stored so (ignore and reject are
 * settled by it). Every other delivery was routed on arrival.
 */
export async function routeUnrouted(deps: Deps, pending: DeliveryRecord[]): Promise<DeliveryRecord[]> {
  if (pending.every((d) => d.route !== null || d.status !== 'queued')) return pending;
  const routed: DeliveryRecord[] = [];
  for (const d of pending) {
    if (d.route !== null || d.status !== 'queued') {
      routed.push(d);
      continue;
    }
    let route: RoutedDelivery;
    try {
      route = await routeLegacy(deps, d);
    } catch (error) {
      route = { action: 'reject', reason: `unreadable delivery: ${describeError(error)}` };
    }
    await deps.inbox.setRoute(d.id, route);
    const reason = 'reason' in route ? route.reason : null;
    if (route.action === 'reject') deps.logger.warn('delivery rejected', { delivery: d.id, reason });
    if (route.action === 'ignore' || route.action === 'reject') continue;
    routed.push({ ...d, route: route.action, workItem: route.workItem, reason });
  }
  return routed;
}

/** The one routing of a row stored before deliveries were routed on arrival (its body is read). */
async function routeLegacy(
  deps: Deps,
  d: Pick<DeliveryRecord, 'id' | 'event' | 'source'>,
): Promise<RoutedDelivery> {
  const payload: unknown = JSON.parse(await deps.inbox.readBody(d.id));
  if (d.source === 'manual') return manualPlan(manualBodySchema().parse(payload) satisfies ManualBody);
  if (!deps.routeLegacy)
    throw new Error('stored by an older version without its plan, and no router to route it');
  return deps.routeLegacy(d.event, payload);
}

/** The stored plan, unless the routing config changed since it was made (then routed again, once). */
export async function planOf(deps: Deps, claim: Claim): Promise<RoutedTurn | undefined> {
  const stored = await deps.inbox.plan(claim.deliveryId);
  const now = deps.routingDigest;
  if (stored && (!stored.routedUnder || !now || stored.routedUnder === now)) return stored;
  if (stored)
    deps.logger.info('the routing config changed since this delivery was planned: routing it again', {
      delivery: claim.deliveryId,
    });
  return planLegacy(deps, claim);
}

/**
 * A start or deliver stored by an older version with its route but not its plan: routed once, from
 * its body, and the plan stored (a retry or a restart runs it as stored). undefined: the routing
 * changed since (the delivery failed, saying so).
 */
async function planLegacy(deps: Deps, claim: Claim): Promise<RoutedTurn | undefined> {
  const { inbox } = deps;
  const d = await inbox.get(claim.deliveryId);
  if (!d) throw new LoopError('internal', `delivery ${claim.deliveryId} is gone`);
  const routed = await routeLegacy(deps, d);
  if (routed.action !== 'start' && routed.action !== 'deliver') {
    await inbox.finish(claim.deliveryId, {
      status: 'failed',
      turnId: null,
      error: `routing changed: ${routed.action}`,
    });
    return undefined;
  }
  await inbox.setRoute(claim.deliveryId, routed);
  return routed;
}
