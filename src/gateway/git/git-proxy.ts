import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { githubToken, githubTokenRefused } from '../github-token.js';
import type { GatewayHandler, GatewayPorts, GatewaySession, WireAct, WireOutcome } from '../types.js';
import { type GitRoute, routeGit } from './git-route.js';
import {
  HEAD_LIMITS,
  type HeadLimits,
  type HeadStep,
  isZeroOid,
  type PushHead,
  ReceivePackHeadReader,
} from './pkt-line.js';
import {
  clientCaps,
  errorReply,
  type JudgedCommand,
  judgePush,
  PushReportReader,
  refusalReply,
  refusedActs,
  settlePush,
} from './receive-pack.js';
import {
  clientHeaders,
  drain,
  neverConnected,
  openUpstream,
  PREFIX,
  sendReply,
  sendText,
  upstreamFailure,
  upstreamHeaders,
} from './upstream.js';

/**
 * The gateway's git smart HTTP proxy. Fetches (upload-pack, protocol v0 and v2) cross untouched.
 * A push (receive-pack) is judged on its ref updates before a byte of it reaches the upstream: the
 * head of the request (Documentation/gitprotocol-pack.txt "Reference Update Request") is read,
 * bounded, and each update decided by the repository's policy; a push with a denied update is
 * refused whole, with the report git prints per ref; an allowed one is forwarded as it arrives
 * (head bytes already read, then the rest of the body, streamed) and settled from the upstream's
 * report while that streams back. Every act is recorded once, with its certain outcome.
 */

export interface GitProxyOptions {
  /** An upstream silent this long (no byte either way) is given up: 504, or the answer cut. Default 120 s. */
  idleTimeoutMs?: number;
  headLimits?: HeadLimits;
}

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  session: GatewaySession;
  ports: GatewayPorts;
  url: string;
  headers: OutgoingHttpHeaders;
  /** The gateway sent a credential of its own upstream. */
  held: boolean;
  idleTimeoutMs: number;
}

export function createGitHandler(options: GitProxyOptions = {}): GatewayHandler {
  const idleTimeoutMs = options.idleTimeoutMs ?? 120_000;
  const limits = options.headLimits ?? HEAD_LIMITS;
  return async (req, res, { session, path, ports }) => {
    const route: GitRoute = routeGit(path, req.method ?? '', session);
    if (!route.ok) {
      ports.logger.warn('git request refused', {
        session: session.id,
        status: route.status,
        method: req.method,
      });
      await drain(req);
      sendText(res, route.status, route.message, route.allow);
      return;
    }
    const pushing = route.endpoint === 'git-receive-pack';
    // The App's installation token for this repository, or the configured token.
    const token = await githubToken(ports, session);
    const ex: Exchange = {
      req,
      res,
      session,
      ports,
      url: `${ports.github.gitUrl}${route.upstreamPath}`,
      headers: upstreamHeaders(req, token, pushing),
      held: token !== undefined,
      idleTimeoutMs,
    };
    if (pushing) await receivePack(ex, limits);
    else await passThrough(ex);
  };
}

/** The handler the gateway mounts at `/git/`. */
export const handleGit: GatewayHandler = createGitHandler();

/** Relay a request and its answer untouched (ref advertisements, fetches). */
function passThrough(ex: Exchange): Promise<void> {
  const { req, res } = ex;
  return new Promise((resolve) => {
    const up = openUpstream(ex.url, req.method ?? 'GET', ex.headers, ex.idleTimeoutMs);
    up.on('response', (ures) => {
      if (refuseCredential(ex, ures)) return;
      res.writeHead(ures.statusCode ?? 502, clientHeaders(ures));
      ures.pipe(res);
      // Cut mid-answer: the client must see a broken answer, not a short one.
      const cut = () => {
        if (!res.destroyed) ex.ports.logger.warn('git upstream answer cut', { session: ex.session.id });
        res.destroy();
      };
      ures.on('error', cut);
      ures.on('aborted', cut);
    });
    up.on('error', (error) => failUpstream(ex, error));
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
      resolve();
    });
    if (req.method === 'POST') req.pipe(up);
    else up.end();
  });
}

/**
 * The upstream refused the gateway's own credential: say so plainly, and never pass its
 * `WWW-Authenticate` on (git would ask the agent for a password it must not have).
 */
function refuseCredential(ex: Exchange, ures: IncomingMessage): boolean {
  if (ures.statusCode !== 401 && ures.statusCode !== 407) return false;
  ures.resume();
  if (ex.held && ures.statusCode === 401) githubTokenRefused(ex.ports, ex.session);
  const why = ex.held
    ? "refused the gateway's GitHub credential"
    : 'needs a credential the gateway does not hold';
  ex.ports.logger.warn('git upstream refused the credential', {
    session: ex.session.id,
    status: ures.statusCode,
  });
  sendText(ex.res, 502, `${PREFIX} the git upstream ${why} (HTTP ${ures.statusCode})`);
  return true;
}

function failUpstream(ex: Exchange, error: unknown): void {
  const { status, message } = upstreamFailure(error);
  // Destroyed by us because the client left: not the upstream's failure.
  if (ex.res.destroyed) return;
  ex.ports.logger.warn('git upstream failed', { session: ex.session.id, status, error });
  if (ex.res.headersSent) ex.res.destroy();
  else sendText(ex.res, status, message);
}

interface HeadRead {
  step: HeadStep;
  /** Every chunk read so far, untouched: what is forwarded first. */
  chunks: Buffer[];
  /** The client went away before the head was read. */
  gone: boolean;
}

/** Read the request until its head is complete (or refused); the rest stays unread, paused. */
function readHead(req: IncomingMessage, reader: ReceivePackHeadReader): Promise<HeadRead> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const finish = (step: HeadStep, gone: boolean) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      req.pause();
      resolve({ step, chunks, gone });
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      const step = reader.push(chunk);
      if (step.state !== 'more') finish(step, false);
    };
    const onEnd = () => finish(reader.end(), false);
    const onClose = () => {
      if (!req.complete) finish(reader.end(), true);
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
    req.on('error', () => {}); // a reset client: handled by 'close'
  });
}

async function receivePack(ex: Exchange, limits: HeadLimits): Promise<void> {
  const { req, res, session, ports } = ex;
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') {
    // git never compresses a push (remote-curl.c sets gzip_request for upload-pack only), and a
    // compressed head could not be judged without inflating it here.
    await record(ex, [headAct('unreadable-input', `a ${encoding}-encoded push body`, 'encoding')]);
    await drain(req);
    sendText(res, 415, `${PREFIX} a push body must not be compressed (Content-Encoding: ${encoding})`);
    return;
  }
  const { step, chunks, gone } = await readHead(req, new ReceivePackHeadReader(limits));
  if (gone) {
    ports.logger.info('git push abandoned by the client before its ref updates', { session: session.id });
    return;
  }
  if (step.state === 'refused') {
    await refuseHead(ex, step);
    return;
  }
  if (step.state !== 'done') {
    sendText(res, 400, `${PREFIX} the push's ref updates could not be read`);
    return;
  }
  const { head } = step;
  const judgement = judgePush(head.commands, ports.policyFor(session.workItem));
  if (!judgement.refused) {
    await forwardPush(ex, head, chunks, judgement.judged);
    return;
  }
  await record(ex, refusedActs(judgement));
  ports.logger.warn('git push refused by policy', {
    session: session.id,
    refs: judgement.judged.filter((j) => j.verdict.verdict === 'deny').map((j) => j.command.ref),
  });
  await drain(req);
  sendReply(res, refusalReply(judgement, clientCaps(head.capabilities)));
}

/** A head that cannot be judged: malformed (400), over the bounds, or a signed push. Nothing is forwarded. */
async function refuseHead(ex: Exchange, step: Extract<HeadStep, { state: 'refused' }>): Promise<void> {
  const kind =
    step.why === 'limit'
      ? 'truncated-input'
      : step.why === 'malformed'
        ? 'unreadable-input'
        : 'unknown-git-act';
  await record(ex, [headAct(kind, step.message, step.why)]);
  ex.ports.logger.warn('git push refused: its head was not accepted', {
    session: ex.session.id,
    why: step.why,
  });
  await drain(ex.req);
  const message = `${PREFIX} ${step.message}`;
  if (step.why === 'malformed') sendText(ex.res, 400, message);
  else
    sendReply(ex.res, errorReply(message, clientCaps(step.capabilities), step.why === 'limit' ? 413 : 403));
}

function headAct(kind: WireAct['kind'], reason: string, why: string): WireAct {
  return {
    kind,
    command: 'git-receive-pack',
    detail: { via: 'git-receive-pack', reason, upstream: 'not sent (refused by the gateway)' },
    outcome: 'blocked',
    verdict: 'deny',
    rule: `gateway: ${why}`,
    reason,
  };
}

/** Record acts in order; one that cannot be recorded is logged (the push goes on as judged). */
async function record(ex: Exchange, acts: WireAct[]): Promise<void> {
  for (const act of acts) {
    try {
      await ex.ports.recordAct(ex.session, act);
    } catch (error) {
      ex.ports.logger.error('a git act could not be recorded', {
        session: ex.session.id,
        kind: act.kind,
        error,
      });
    }
  }
}

/** Forward an allowed push as it arrives, stream the answer back, and settle its acts from the report. */
function forwardPush(ex: Exchange, head: PushHead, chunks: Buffer[], judged: JudgedCommand[]): Promise<void> {
  const { req, res, ports, session } = ex;
  const caps = clientCaps(head.capabilities);
  const reader = new PushReportReader(caps.sideband !== undefined, judged.length * 2 + 16);
  let settled = false;
  const settle = (outcome: WireOutcome, upstream: string) => {
    if (settled) return;
    settled = true;
    const acts = settlePush(judged, reader.report, { outcome, upstream });
    void record(ex, acts);
    if (acts.length === 0) return; // the flush-only probe
    ports.logger.info('git push forwarded', {
      session: session.id,
      refs: acts.length,
      outcomes: [...new Set(acts.map((a) => a.outcome))],
    });
  };
  // Nothing is applied without the whole pack: a body cut before its end cannot have landed.
  const needsPack = judged.some((j) => !isZeroOid(j.command.newOid));
  const cutShort = (what: string) =>
    !req.complete && needsPack
      ? settle('failed', `${what} before the whole pack was sent`)
      : settle('unknown', what);
  return new Promise((resolve) => {
    const up = openUpstream(ex.url, 'POST', ex.headers, ex.idleTimeoutMs);
    up.on('response', (ures) => {
      const status = ures.statusCode ?? 502;
      if (status !== 200) {
        // 4xx: the upstream refused the request itself; 5xx: it may have failed anywhere.
        settle(status < 500 ? 'failed' : 'unknown', `HTTP ${status}`);
        if (refuseCredential(ex, ures)) return;
      }
      res.writeHead(status, clientHeaders(ures));
      ures.pipe(res);
      ures.on('data', (chunk: Buffer) => reader.push(chunk));
      ures.on('end', () => settle('unknown', 'the upstream answer ended before its report'));
      const cut = () => {
        settle('unknown', 'the upstream answer was cut before its report');
        res.destroy();
      };
      ures.on('error', cut);
      ures.on('aborted', cut);
    });
    up.on('error', (error) => {
      if (neverConnected(error)) settle('failed', upstreamFailure(error).message);
      else cutShort(upstreamFailure(error).message);
      failUpstream(ex, error);
    });
    res.on('close', () => {
      if (!res.writableFinished) {
        up.destroy();
        cutShort('the client went away');
      }
      resolve();
    });
    for (const chunk of chunks) up.write(chunk);
    req.pipe(up);
  });
}
