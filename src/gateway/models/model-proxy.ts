import {
  type Agent,
  request as httpRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { GatewayHandler, GatewayPorts, GatewaySession, ModelApi } from '../types.js';
import { upstreamAgents } from '../upstream-agents.js';
import { admit, readChecked, send } from './admit.js';
import { isReachabilityCheck } from './allow-list.js';
import { clientResponseHeaders } from './rewrite.js';
import { bodyKind, createUsageMeter, type UsageMeter } from './usage.js';

/**
 * The model API proxy: `/m/<token>/<rest>` → the session's model upstream, with the capability
 * token swapped for the real credential, the budget checked before anything that can cost tokens,
 * and the `wire` meter reading usage from the response as it streams through, unbuffered.
 */

export type ModelHandlerCtx = Parameters<GatewayHandler>[2] & { token: string };
export interface ModelHandler {
  (req: IncomingMessage, res: ServerResponse, ctx: ModelHandlerCtx): Promise<void>;
  /** Drop the pooled keep-alive connections to the upstreams (when the gateway closes). */
  close(): void;
}

export interface ModelProxyOptions {
  /**
   * Silence on an exchange (no request or response bytes) this long ends it: 504 when nothing was
   * sent yet, else the response is cut. 10 min: a non-stream request for a long answer sends its
   * headers only when the whole answer is ready.
   */
  idleTimeoutMs?: number;
  /** Request bodies past this are refused with 413 (a long conversation resent whole is a few MB). */
  maxRequestBytes?: number;
  now?: () => Date;
}

const DEFAULT_IDLE_MS = 10 * 60_000;
const DEFAULT_MAX_REQUEST = 32 * 1024 * 1024;

/** How an exchange ended: `complete` is the upstream's normal end, the rest are cuts or refusals. */
type Outcome = 'complete' | 'cut' | 'timeout' | 'client-gone' | 'upstream-error' | 'too-large';

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  session: GatewaySession;
  ports: GatewayPorts;
  api: ModelApi;
  url: URL;
  headers: OutgoingHttpHeaders;
  /** When the request was made (formatted only when its row is written, off the request's path). */
  at: Date;
  started: number;
  /** Why the response was not metered, when it was not. */
  note?: string;
  /** The request body, when it was read whole to be checked (else it streams from `req`). */
  body?: Buffer;
}

/** The model a Gemini path names (`/v1beta/models/<model>:<method>`): the row's model when the body names none. */
const modelOfPath = (path: string): string | undefined => /\/models\/([^/:?]+):/.exec(path)?.[1] ?? undefined;

export function createModelHandler(options: ModelProxyOptions = {}): ModelHandler {
  const idleMs = options.idleTimeoutMs ?? DEFAULT_IDLE_MS;
  const maxBytes = options.maxRequestBytes ?? DEFAULT_MAX_REQUEST;
  const now = options.now ?? (() => new Date());
  // Keep-alive to the upstream, pooled per protocol (made on first use: see upstream-agents.ts).
  const agents = upstreamAgents();

  const handle = async function handleModel(req: IncomingMessage, res: ServerResponse, ctx: ModelHandlerCtx) {
    // Claude Code checks its base URL answers (`HEAD /m/<token>`) before the first request.
    if (isReachabilityCheck(req.method, ctx.path)) {
      res.writeHead(200, { 'content-length': '0' });
      res.end();
      return;
    }
    const admitted = await admit(req, res, ctx, maxBytes);
    if (!admitted) return;
    const { api, url, headers, check, path } = admitted;
    const { session, ports } = ctx;
    const exchange: Exchange = {
      req,
      res,
      session,
      ports,
      api,
      url,
      headers,
      at: now(),
      started: Date.now(),
    };
    if (check) {
      const body = await readChecked(req, res, { session, ports, api, path }, check, maxBytes, idleMs);
      if (!body) return;
      exchange.body = body;
    }
    const agent = agents.get(url.protocol) ?? (agents.get('http:') as Agent);
    await forward(exchange, agent, idleMs, maxBytes);
  };
  return Object.assign(handle, {
    close: () => agents.destroy(),
  });
}

/** The handler with the default options, as the gateway mounts it under `/m/`. */
export const handleModel: ModelHandler = createModelHandler();

/** The state of one exchange in flight. */
interface Flow {
  /** What the response's usage is read with; the meter itself is made at its first chunk. */
  metered: Parameters<typeof createUsageMeter> | undefined;
  meter: UsageMeter | undefined;
  /** Chunks of the current upstream read, not yet relayed (see `relayResponse`). */
  batch: Buffer[];
  batchBytes: number;
  /** Chunks relayed but not yet read by the meter (it reads them once their bytes are out). */
  unmetered: Buffer[];
  settled: boolean;
  status: number;
  bytes: { in: number; out: number };
  /** Refreshed by every byte either way; fires `timeout` after `idleMs` of silence. */
  idle: NodeJS.Timeout;
  end: (outcome: Outcome, error?: unknown) => void;
}

/** One exchange with the upstream; resolves when it is over, never rejects. */
function forward(x: Exchange, agent: Agent, idleMs: number, maxBytes: number): Promise<void> {
  const { req, res, url } = x;
  return new Promise<void>((resolve) => {
    const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const upstream = request(url, { method: req.method, headers: x.headers, agent });
    const flow: Flow = {
      metered: undefined,
      meter: undefined,
      batch: [],
      batchBytes: 0,
      unmetered: [],
      settled: false,
      status: 0,
      bytes: { in: 0, out: 0 },
      idle: setTimeout(() => flow.end('timeout'), idleMs),
      end: (outcome, error) => {
        if (flow.settled) return;
        flow.settled = true;
        clearTimeout(flow.idle);
        if (outcome !== 'complete') {
          upstream.destroy();
          // Whatever of the request is still arriving is read and dropped (a paused one would stall).
          req.resume();
          answerFailure(x, outcome, maxBytes);
        }
        // The exchange ends once its usage is recorded (record logs what it cannot record).
        void record(x, flow, outcome, error).then(resolve, (e: unknown) => {
          x.ports.logger.error('a model request could not be recorded', { session: x.session.id, error: e });
          resolve();
        });
      },
    };
    flow.idle.unref();
    // Errors are handled through `end`; these listeners keep a reset socket from crashing the daemon.
    req.on('error', () => flow.end('client-gone'));
    res.on('error', () => flow.end('client-gone'));
    res.on('close', () => {
      if (!res.writableFinished) flow.end('client-gone');
    });
    upstream.on('error', (error) => flow.end(res.headersSent ? 'cut' : 'upstream-error', error));
    upstream.on('response', (upRes) => relayResponse(x, flow, upRes));
    if (x.body) {
      // Read whole to be checked (readChecked): sent as one, already bounded.
      flow.bytes.in = x.body.length;
      upstream.end(x.body);
      return;
    }
    upstream.on('drain', () => req.resume());
    req.on('data', (chunk: Buffer) => {
      if (flow.settled) return;
      flow.idle.refresh();
      flow.bytes.in += chunk.length;
      if (flow.bytes.in > maxBytes) flow.end('too-large');
      else if (!upstream.write(chunk)) req.pause();
    });
    req.on('end', () => {
      if (!flow.settled) upstream.end();
    });
  });
}

/** What the engine gets when the exchange ends early: an error if nothing was sent yet, else a cut. */
function answerFailure(x: Exchange, outcome: Exclude<Outcome, 'complete'>, maxBytes: number): void {
  const { res, api } = x;
  if (outcome === 'timeout')
    send(res, api, 'timeout', '[the-loop gateway] the model API did not answer in time');
  else if (outcome === 'upstream-error') {
    send(res, api, 'bad-gateway', '[the-loop gateway] the model API could not be reached');
  } else if (outcome === 'too-large') {
    send(res, api, 'too-large', `[the-loop gateway] request body over ${maxBytes} bytes`, true);
  } else if (!res.writableEnded) res.destroy();
}

/** The upstream's answer, relayed as it comes and teed into the meter. */
function relayResponse(x: Exchange, flow: Flow, upRes: IncomingMessage): void {
  const { res, url } = x;
  flow.idle.refresh();
  flow.status = upRes.statusCode ?? 502;
  const kind = bodyKind(upRes.headers['content-type']);
  // We asked for identity; an upstream that compresses anyway is relayed, unmetered, and said so.
  const encoding = upRes.headers['content-encoding'] ?? 'identity';
  if (kind && encoding !== 'identity') x.note = `a ${encoding} body was not metered`;
  else if (kind) flow.metered = [x.api, kind, { modelHint: modelOfPath(url.pathname) }];
  res.writeHead(flow.status, clientResponseHeaders(upRes.headers));
  // The headers go out with the first body bytes (one packet, one wake-up of the engine) — or on
  // the next turn if no body came with them, so a client waiting on headers is not held.
  setImmediate(() => {
    if (!res.headersSent && !res.destroyed) res.flushHeaders();
  });
  res.on('drain', () => upRes.resume());
  // One socket read of the upstream holds many small HTTP chunks (one per event), each its own
  // 'data' event. They are relayed as one chunk at the end of the read: Node holds (corks) every
  // write until the next tick anyway, so no byte waits longer, and the framing, the write and the
  // meter's push are paid once per read instead of once per event.
  const flush = () => {
    const chunk = takeBatch(flow);
    if (!chunk || flow.settled) return;
    flow.idle.refresh();
    if (!res.write(chunk)) upRes.pause();
    if (!flow.metered) return;
    // Relay first, meter after: the write is held until a tick callback Node has just queued, so
    // the meter reads the chunk in the next one, once its bytes are on their way to the engine.
    if (flow.unmetered.length === 0) process.nextTick(meterPending, flow);
    flow.unmetered.push(chunk);
  };
  upRes.on('data', (chunk: Buffer) => {
    if (flow.settled) return;
    if (flow.batch.length === 0) process.nextTick(flush);
    flow.batch.push(chunk);
    flow.batchBytes += chunk.length;
    flow.bytes.out += chunk.length;
  });
  upRes.on('end', () => {
    if (flow.settled) return;
    flush();
    res.end();
    flow.end('complete');
  });
  upRes.on('error', (error) => flow.end('cut', error));
  upRes.on('close', () => flow.end('cut'));
}

/** The chunks of the current read as one (a copy only when there are several); undefined: none. */
function takeBatch(flow: Flow): Buffer | undefined {
  const { batch, batchBytes } = flow;
  if (batch.length === 0) return undefined;
  flow.batch = [];
  flow.batchBytes = 0;
  return batch.length === 1 ? batch[0] : Buffer.concat(batch, batchBytes);
}

/** The response's meter, made on first use (after the first bytes went out). */
function meterOf(flow: Flow): UsageMeter | undefined {
  if (!flow.meter && flow.metered) flow.meter = createUsageMeter(...flow.metered);
  return flow.meter;
}

/** Feed the meter what has been relayed and not read yet. */
function meterPending(flow: Flow): void {
  const chunks = flow.unmetered;
  if (chunks.length === 0) return;
  flow.unmetered = [];
  const meter = meterOf(flow);
  for (const chunk of chunks) meter?.push(chunk);
}

async function record(x: Exchange, flow: Flow, outcome: Outcome, error: unknown): Promise<void> {
  const { ports, session } = x;
  // Everything received is metered, as far as it got: relayed, and (on a cut) not yet relayed.
  meterPending(flow);
  const meter = meterOf(flow);
  const rest = takeBatch(flow);
  if (rest) meter?.push(rest);
  const { status, bytes } = flow;
  const usage = meter?.finish(x.at.toISOString());
  const note = meter?.note ?? x.note;
  const fields = {
    session: session.id,
    api: x.api,
    method: x.req.method,
    // The path only: a query may hold a key.
    path: x.url.pathname,
    status,
    outcome,
    bytesIn: bytes.in,
    bytesOut: bytes.out,
    ms: Date.now() - x.started,
    ...(note ? { meter: note } : {}),
    ...(error instanceof Error ? { error: (error as NodeJS.ErrnoException).code ?? error.message } : {}),
  };
  if (outcome !== 'complete') ports.logger.warn('model request ended early', fields);
  else if (note) ports.logger.warn('model response not fully metered', fields);
  else ports.logger.debug('model request relayed', fields);
  if (!usage) return;
  try {
    await ports.recordUsage(session, usage);
  } catch (e) {
    ports.logger.error('wire usage could not be recorded', { session: session.id, api: x.api, error: e });
  }
}
