import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Inbox, NewDelivery } from '../core/ports/inbox.js';
import type { Logger } from '../log/logger.js';
import { type BodyRefusal, busyHeaders, readBodyWithin } from '../web/read-body.js';
import { reply } from '../web/server.js';
import type { RouteResult } from './route.js';
import { verifySignature } from './verify.js';

export interface IngressOptions {
  secret: string;
  maxBodyBytes: number;
  inbox: Inbox;
  logger: Logger;
  /** Called after a new delivery is committed (wakes the dispatcher). */
  onAccepted: (deliveryId: string) => void;
  /** The pure router: when given, deliveries are stored already routed. */
  route?: (event: string, payload: unknown) => RouteResult;
}

const DELIVERY_ID = /^[A-Za-z0-9-]{1,100}$/;
const EVENT_NAME = /^[a-z_]{1,64}$/;

/**
 * `POST /gh-webhook`: check method, content type and headers; read the raw body within the limit;
 * verify the HMAC over those exact bytes in constant time; then parse; then commit the delivery to the
 * inbox and only then answer 202 (a redelivered id: 200 duplicate). Every refusal has its own status
 * and a one-line reason. The work happens after the answer (invariant 5).
 */
export function createIngressHandler(options: IngressOptions) {
  const { logger, inbox } = options;
  // Group commit: deliveries whose bodies completed in the same turn of the event loop are committed
  // in one transaction (one WAL commit), then each is answered. Nothing is answered before its commit.
  type Pending = {
    d: NewDelivery;
    resolve: (v: 'accepted' | 'duplicate') => void;
    reject: (e: unknown) => void;
  };
  let queue: Pending[] = [];
  const flush = () => {
    const items = queue;
    queue = [];
    try {
      const out = (inbox.batch as NonNullable<Inbox['batch']>)(() => items.map((i) => inbox.accept(i.d)));
      for (const [k, item] of items.entries()) item.resolve(out[k] as 'accepted' | 'duplicate');
    } catch (error) {
      for (const i of items) i.reject(error);
    }
  };
  const accept = (d: NewDelivery): Promise<'accepted' | 'duplicate'> =>
    inbox.batch
      ? new Promise((resolve, reject) => {
          queue.push({ d, resolve, reject });
          if (queue.length === 1) setImmediate(flush);
        })
      : Promise.resolve(inbox.accept(d));
  return async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method !== 'POST') return reply(res, 405, 'method not allowed: use POST', { allow: 'POST' });
    const type = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
    const form = type === 'application/x-www-form-urlencoded';
    if (type !== 'application/json' && !form) {
      return reply(res, 415, 'unsupported content type: send application/json (or form-encoded payload=)');
    }
    const event = req.headers['x-github-event'];
    const delivery = req.headers['x-github-delivery'];
    const signature = req.headers['x-hub-signature-256'];
    if (typeof event !== 'string' || !EVENT_NAME.test(event))
      return reply(res, 400, 'missing or invalid X-GitHub-Event header');
    if (typeof delivery !== 'string' || !DELIVERY_ID.test(delivery)) {
      return reply(res, 400, 'missing or invalid X-GitHub-Delivery header');
    }
    if (typeof signature !== 'string')
      return reply(res, 401, 'missing X-Hub-Signature-256 header (is a secret set on the webhook?)');
    // Checked here before a byte is read (readBodyWithin refuses it too, this says how big it was).
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > options.maxBodyBytes) {
      return reply(res, 413, `body of ${declared} bytes is over the limit of ${options.maxBodyBytes}`, {
        connection: 'close',
      });
    }
    const read = await readBodyWithin(req, options.maxBodyBytes);
    if (!read.ok)
      return refuseBody(res, read.why, {
        delivery,
        busy: busyHeaders(req),
        maxBodyBytes: options.maxBodyBytes,
        logger,
      });
    const body = read.body;
    if (!verifySignature(options.secret, body, signature)) {
      logger.warn('webhook signature mismatch', { delivery, event });
      return reply(res, 401, 'signature does not match (check the webhook secret)');
    }
    let json: string;
    let payload: unknown;
    try {
      json = form ? (new URLSearchParams(body.toString('utf8')).get('payload') ?? '') : body.toString('utf8');
      payload = JSON.parse(json);
    } catch {
      return reply(res, 400, 'body is not valid JSON');
    }
    if (!payload || typeof payload !== 'object' || Array.isArray(payload))
      return reply(res, 400, 'payload is not a JSON object');
    if (event === 'ping') return reply(res, 200, 'pong');
    const action =
      typeof (payload as { action?: unknown }).action === 'string'
        ? (payload as { action: string }).action.slice(0, 64)
        : null;
    let outcome: 'accepted' | 'duplicate';
    try {
      let route: NewDelivery['route'];
      if (options.route) {
        try {
          const r = options.route(event, payload);
          route = {
            action: r.action,
            workItem: ('workItem' in r && r.workItem) || null,
            reason: 'reason' in r ? r.reason : null,
          };
        } catch {
          route = undefined; // the dispatcher routes it later, as before
        }
      }
      outcome = await accept({ id: delivery, source: 'github', event, action, body: json, route });
    } catch (error) {
      // Not stored, so not acknowledged: GitHub will show the failure and can redeliver.
      logger.error('could not store a delivery', { delivery, error });
      return reply(res, 503, 'could not store the delivery; try again');
    }
    if (outcome === 'duplicate') return reply(res, 200, 'duplicate');
    reply(res, 202, 'accepted');
    logger.debug('delivery accepted', { delivery, event, action });
    options.onAccepted(delivery);
  };
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
