import type { IncomingMessage, ServerResponse } from 'node:http';
import { describeError, LoopError } from '../core/errors.js';
import type { Inbox, NewDelivery, RoutedDelivery } from '../core/ports/inbox.js';
import { sanitizeLine } from '../core/text.js';
import type { Logger } from '../log/logger.js';
import { type BodyRefusal, busyHeaders, readBodyWithin } from '../web/read-body.js';
import { reply } from '../web/server.js';
import { verifySignature } from './verify.js';

export interface IngressOptions {
  secret: string;
  maxBodyBytes: number;
  inbox: Pick<Inbox, 'acceptArriving'>;
  logger: Logger;
  /**
   * Called after a new delivery that waits to run (routed start, deliver or close) is committed: it
   * wakes the dispatcher. One routed ignore or reject is settled as stored, with nothing to dispatch.
   */
  onAccepted: (deliveryId: string) => void;
  /** The pure router: each delivery is routed once, here, and stored with what it made of it. */
  route: (event: string, payload: object) => RoutedDelivery;
}

const DELIVERY_ID = /^[A-Za-z0-9-]{1,100}$/;

/** The secret webhooks are signed with: a daemon does not start without one. */
export function webhookSecret(webhook: { secret?: string | undefined }): string {
  if (webhook.secret) return webhook.secret;
  throw new LoopError('config-invalid', 'no webhook secret configured (webhook.secret)', {
    hint: 'Set webhook.secret (e.g. env:THE_LOOP_WEBHOOK_SECRET) in the config; `the-loop config init` generates one.',
  });
}
const EVENT_NAME = /^[a-z_]{1,64}$/;

/**
 * `POST /gh-webhook`: check method, content type and headers; read the raw body within the limit;
 * verify the HMAC over those exact bytes in constant time; then parse; route; then commit the
 * delivery with its route to the inbox and only then answer 202 (a redelivered id: 200 duplicate).
 * Every refusal has its own status and a one-line reason. The work happens after the answer
 * (invariant 5).
 */
export function createIngressHandler(options: IngressOptions) {
  const { logger } = options;
  const store = storeOnce(options);
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const head = checkHead(req, options.maxBodyBytes);
    if ('status' in head) return reply(res, head.status, head.text, head.headers);
    const { event, delivery, signature } = head;
    const read = await readBodyWithin(req, options.maxBodyBytes);
    if (!read.ok)
      return refuseBody(res, read.why, {
        delivery,
        busy: busyHeaders(req),
        maxBodyBytes: options.maxBodyBytes,
        logger,
      });
    if (!verifySignature(options.secret, read.body, signature)) {
      logger.warn('webhook signature mismatch', { delivery, event });
      return reply(res, 401, 'signature does not match (check the webhook secret)');
    }
    const parsed = parseBody(read.body, head.form);
    if (typeof parsed === 'string') return reply(res, 400, parsed);
    if (event === 'ping') return reply(res, 200, 'pong');
    const { bytes, json, payload } = parsed;
    const action =
      'action' in payload && typeof payload.action === 'string' ? payload.action.slice(0, 64) : null;
    let outcome: Stored;
    try {
      const d = { id: delivery, source: 'github' as const, event, action, body: bytes, bodyText: json };
      outcome = await store(d, payload);
    } catch (error) {
      // Not stored, so not acknowledged: GitHub will show the failure and can redeliver.
      logger.error('could not store a delivery', { delivery, error });
      return reply(res, 503, 'could not store the delivery; try again');
    }
    if (outcome === 'duplicate') return reply(res, 200, 'duplicate');
    reply(res, 202, 'accepted');
    logger.debug('delivery accepted', { delivery, event, action });
    if (outcome === 'queued') options.onAccepted(delivery);
  };
}

/**
 * What became of a delivery: stored and waiting to run (queued), stored and settled by its route
 * (ignore, reject), or a redelivery (duplicate).
 */
type Stored = 'queued' | 'settled' | 'duplicate';

/** Ignore and reject are final when routed: the stored delivery gives the dispatcher nothing to do. */
const settles = (routed: RoutedDelivery) => routed.action === 'ignore' || routed.action === 'reject';

/**
 * Each delivery id is routed and stored once: a redelivery of a stored one, or one that arrives while
 * the first is being stored, is a duplicate, answered without routing it again.
 */
function storeOnce(
  options: Pick<IngressOptions, 'inbox' | 'route' | 'logger'>,
): (d: Omit<NewDelivery, 'routed'>, payload: object) => Promise<Stored> {
  const accept = groupCommit(options);
  const inflight = new Map<string, Promise<Stored>>();
  return async (d, payload) => {
    const first = inflight.get(d.id);
    if (first) {
      await first;
      return 'duplicate';
    }
    const stored = accept(d, payload);
    inflight.set(d.id, stored);
    try {
      return await stored;
    } finally {
      inflight.delete(d.id);
    }
  };
}

/**
 * Group commit: deliveries whose bodies completed in the same turn of the event loop are stored in
 * one transaction (one WAL commit) — each routed there unless its id is stored already (a redelivery:
 * a duplicate, not routed again) — then each is answered. Nothing is answered before its commit.
 * (The in-flight map above keeps one id out of a batch twice.)
 */
function groupCommit(
  options: Pick<IngressOptions, 'inbox' | 'route' | 'logger'>,
): (d: Omit<NewDelivery, 'routed'>, payload: object) => Promise<Stored> {
  type Pending = {
    d: Omit<NewDelivery, 'routed'>;
    payload: object;
    resolve: (v: Stored) => void;
    reject: (e: unknown) => void;
  };
  let queue: Pending[] = [];
  const flush = async () => {
    const items = queue;
    queue = [];
    try {
      const out = await options.inbox.acceptArriving(
        items.map(({ d, payload }) => ({
          id: d.id,
          source: d.source,
          event: d.event,
          action: d.action,
          body: d.body,
          bodyText: d.bodyText,
          route: () => routeOnce(options, d.event, payload, d.id),
        })),
      );
      items.forEach((item, k) => {
        const outcome = out[k];
        if (outcome === 'duplicate') item.resolve('duplicate');
        else if (outcome) item.resolve(settles(outcome) ? 'settled' : 'queued');
        else item.reject(new Error('the inbox did not answer for every delivery'));
      });
    } catch (error) {
      for (const i of items) i.reject(error);
    }
  };
  return (d, payload) =>
    new Promise((resolve, reject) => {
      queue.push({ d, payload, resolve, reject });
      if (queue.length === 1) setImmediate(() => void flush());
    });
}

type Head = { event: string; delivery: string; signature: string; form: boolean };
type Refusal = { status: number; text: string; headers?: Record<string, string> };

/** Method, content type, the GitHub headers and the declared size: all before a byte is read. */
function checkHead(req: IncomingMessage, maxBodyBytes: number): Head | Refusal {
  if (req.method !== 'POST')
    return { status: 405, text: 'method not allowed: use POST', headers: { allow: 'POST' } };
  const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  const form = type === 'application/x-www-form-urlencoded';
  if (type !== 'application/json' && !form) {
    return {
      status: 415,
      text: 'unsupported content type: send application/json (or form-encoded payload=)',
    };
  }
  const event = req.headers['x-github-event'];
  const delivery = req.headers['x-github-delivery'];
  const signature = req.headers['x-hub-signature-256'];
  if (typeof event !== 'string' || !EVENT_NAME.test(event))
    return { status: 400, text: 'missing or invalid X-GitHub-Event header' };
  if (typeof delivery !== 'string' || !DELIVERY_ID.test(delivery)) {
    return { status: 400, text: 'missing or invalid X-GitHub-Delivery header' };
  }
  if (typeof signature !== 'string')
    return { status: 401, text: 'missing X-Hub-Signature-256 header (is a secret set on the webhook?)' };
  // Checked here before a byte is read (readBodyWithin refuses it too, this says how big it was).
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBodyBytes) {
    return {
      status: 413,
      text: `body of ${declared} bytes is over the limit of ${maxBodyBytes}`,
      headers: { connection: 'close' },
    };
  }
  return { event, delivery, signature, form };
}

/**
 * The JSON object a verified body holds (a form's payload= field), or why it is not one; with the
 * bytes to store (the body as it came; a form's field as UTF-8) and their text.
 */
function parseBody(body: Buffer, form: boolean): { bytes: Buffer; json: string; payload: object } | string {
  let json: string;
  let payload: unknown;
  try {
    json = form ? (new URLSearchParams(body.toString('utf8')).get('payload') ?? '') : body.toString('utf8');
    payload = JSON.parse(json);
  } catch {
    return 'body is not valid JSON';
  }
  if (!payload || typeof payload !== 'object' || Array.isArray(payload))
    return 'payload is not a JSON object';
  return { bytes: form ? Buffer.from(json, 'utf8') : body, json, payload };
}

/**
 * The one routing of a delivery. The router is pure and answers every payload; should it throw all
 * the same, the delivery is stored rejected with the reason (never routed again later).
 */
function routeOnce(
  options: Pick<IngressOptions, 'route' | 'logger'>,
  event: string,
  payload: object,
  delivery: string,
): RoutedDelivery {
  try {
    return options.route(event, payload);
  } catch (error) {
    options.logger.error('the router failed on a delivery; stored rejected', { delivery, event, error });
    return { action: 'reject', reason: `routing failed: ${sanitizeLine(describeError(error), 300)}` };
  }
}

/** The answer to a body that was not read whole: each cause its own status and reason. */
function refuseBody(
  res: ServerResponse,
  why: BodyRefusal,
  o: { delivery: string; busy: Record<string, string>; maxBodyBytes: number; logger: Logger },
): void {
  if (why === 'too-large') {
    reply(res, 413, `body is over the limit of ${o.maxBodyBytes} bytes`, { connection: 'close' });
  } else if (why === 'busy') {
    o.logger.debug('webhook body refused: no room among the bodies in flight', { delivery: o.delivery });
    reply(res, 503, 'too many request bodies in flight; try again later', o.busy);
  } else {
    o.logger.warn('webhook request aborted before its body ended', { delivery: o.delivery });
    reply(res, 400, 'request body ended early');
  }
}
