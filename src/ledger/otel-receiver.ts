import { createHmac, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { gunzipSync } from 'node:zlib';
import type { SessionRecord, SessionStore } from '../core/ports/sessions.js';
import type { EnginePreset } from '../engines/preset.js';
import type { Logger } from '../log/logger.js';
import { type BodyRefusal, busyHeaders, readBodyWithin } from '../web/read-body.js';
import { type Handler, reply } from '../web/server.js';
import { type Ledger, type LedgerEntry, NO_TELEMETRY_YET } from './ledger.js';
import { type OtelParse, parseOtlpLogs, parseOtlpMetrics } from './otel.js';
import { loadKeyFile, sessionPayer } from './payer.js';

/** Largest OTLP post accepted, before and after gzip (an exporter's batch is a few kB). */
export const OTLP_MAX_BODY_BYTES = 4 * 1024 * 1024;

const TOKEN = /^tl1\.([A-Za-z0-9-]{1,64})\.([0-9a-f]{32})$/;

export interface TelemetryReceiverDeps {
  /** The sessions a token names, and their turns (what a record is attributed to). */
  store: Pick<SessionStore, 'get' | 'turnAt'>;
  ledger: Ledger;
  logger: Logger;
  dataDir: string;
  engines: Record<string, EnginePreset>;
  /** Registers the per-session tokens with the scrubber (they authorize writes to the ledger). */
  addSecret: (value: string) => void;
  maxBodyBytes?: number;
}

/**
 * The OpenTelemetry meter: an OTLP/HTTP JSON receiver (`POST /v1/logs`, `POST /v1/metrics`) whose
 * posts become usage-ledger rows (meter `otel`). Engines that opt in (`engines.<name>.otel.enabled`)
 * get their exporter pointed here with a per-session bearer token — an HMAC under a key kept in the
 * data dir — so a post is attributed to the session that token names, and only data points whose
 * `session.id` is that session's engine id (or that carry none) are counted. Nothing else may write.
 */
export class TelemetryReceiver {
  private key: Buffer | undefined;
  private url: string | undefined;

  constructor(private readonly deps: TelemetryReceiverDeps) {}

  /** Where engines send their telemetry, once a server listens (undefined: not listening). */
  get endpoint(): string | undefined {
    return this.url;
  }

  /** The server listens at `url` (an unspecified host is reached on the loopback). */
  listenAt(url: string | undefined): void {
    this.url = url?.replace('//0.0.0.0:', '//127.0.0.1:').replace('//[::]:', '//[::1]:');
  }

  private tokenFor(sessionId: string): string {
    this.key ??= loadKeyFile(this.deps.dataDir, 'otel-key');
    const mac = createHmac('sha256', this.key).update(`otel:${sessionId}`).digest('hex').slice(0, 32);
    return `tl1.${sessionId}.${mac}`;
  }

  /**
   * The environment that points an opted-in engine's exporter here; undefined when the engine does
   * not opt in or nothing listens (its own meter is used then).
   */
  envFor(sessionId: string, preset: EnginePreset): Record<string, string> | undefined {
    const otel = preset.otel;
    if (!otel?.enabled || !this.url) return undefined;
    const token = this.tokenFor(sessionId);
    this.deps.addSecret(token);
    const interval = String(otel.exportIntervalMs);
    return {
      ...otel.env,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_EXPORTER_OTLP_ENDPOINT: this.url,
      OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer ${token}`,
      OTEL_LOGS_EXPORTER: otel.signal === 'logs' ? 'otlp' : 'none',
      OTEL_METRICS_EXPORTER: otel.signal === 'metrics' ? 'otlp' : 'none',
      OTEL_TRACES_EXPORTER: 'none',
      OTEL_LOGS_EXPORT_INTERVAL: interval,
      OTEL_METRIC_EXPORT_INTERVAL: interval,
      OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE: 'delta',
    };
  }

  routes(): Record<string, Handler> {
    return {
      '/v1/logs': (req, res) => this.handle('logs', req, res),
      '/v1/metrics': (req, res) => this.handle('metrics', req, res),
    };
  }

  private async handle(signal: 'logs' | 'metrics', req: IncomingMessage, res: ServerResponse): Promise<void> {
    const { logger } = this.deps;
    const max = this.deps.maxBodyBytes ?? OTLP_MAX_BODY_BYTES;
    if (req.method !== 'POST') return reply(res, 405, 'use POST', { allow: 'POST' });
    const match = TOKEN.exec(/^Bearer (\S+)$/i.exec(String(req.headers.authorization ?? ''))?.[1] ?? '');
    const session = match ? await this.authorize(match[1] as string, match[0]) : undefined;
    if (!session) {
      logger.warn('OTLP post refused: no valid session token', { signal });
      return reply(res, 401, 'missing or invalid session token');
    }
    const type = String(req.headers['content-type'] ?? '').toLowerCase();
    if (!type.startsWith('application/json')) {
      return reply(
        res,
        415,
        'unsupported content type: send OTLP/HTTP JSON (OTEL_EXPORTER_OTLP_PROTOCOL=http/json)',
      );
    }

    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > max) {
      return reply(res, 413, `body of ${declared} bytes is over the limit of ${max}`, {
        connection: 'close',
      });
    }
    const read = await readBodyWithin(req, max);
    if (!read.ok) return refuseBody(req, res, read.why, max);
    const raw = read.body;
    let text: string;
    try {
      const encoding = String(req.headers['content-encoding'] ?? 'identity').toLowerCase();
      if (encoding === 'gzip') text = gunzipSync(raw, { maxOutputLength: max }).toString('utf8');
      else if (encoding === 'identity') text = raw.toString('utf8');
      else return reply(res, 415, `unsupported content encoding ${encoding.slice(0, 40)}: send gzip or none`);
    } catch (error) {
      const tooBig = (error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE';
      return reply(
        res,
        tooBig ? 413 : 400,
        tooBig ? `body is over ${max} bytes unzipped` : 'body is not valid gzip',
      );
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      logger.warn('OTLP post refused: body is not JSON', { signal, session: session.id });
      return reply(res, 400, 'body is not JSON');
    }
    const wanted = this.deps.engines[session.engine]?.otel?.signal ?? 'logs';
    const parsed: OtelParse =
      signal === wanted
        ? signal === 'logs'
          ? parseOtlpLogs(body)
          : parseOtlpMetrics(body)
        : // The other signal is not this session's meter: counting it too would count twice.
          { records: [], rejected: 0, warnings: [] };
    const accepted = await this.record(session, parsed);
    if (parsed.warnings.length > 0) {
      logger.warn('OTLP post partly unreadable', {
        signal,
        session: session.id,
        rejected: parsed.rejected,
        problems: parsed.warnings,
      });
    }
    const rejectedKey = signal === 'logs' ? 'rejectedLogRecords' : 'rejectedDataPoints';
    const answer =
      parsed.rejected > 0 || parsed.warnings.length > 0
        ? { partialSuccess: { [rejectedKey]: parsed.rejected, errorMessage: parsed.warnings.join('; ') } }
        : {};
    logger.debug('OTLP post recorded', { signal, session: session.id, rows: accepted });
    return reply(res, 200, JSON.stringify(answer), { 'content-type': 'application/json' });
  }

  /**
   * The session a token names, if the token is this installation's for it and the session is still
   * active: a token lives as long as its session, so one that ended (closed, lost, ended by its
   * engine) adds nothing more to the ledger.
   */
  private async authorize(sessionId: string, token: string): Promise<SessionRecord | undefined> {
    const expected = Buffer.from(this.tokenFor(sessionId));
    const given = Buffer.from(token);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
    const session = await this.deps.store.get(sessionId);
    return session?.status === 'active' ? session : undefined;
  }

  /** The parsed records as ledger rows of `session`; returns how many rows were added or corrected. */
  private async record(session: SessionRecord, parsed: OtelParse): Promise<number> {
    const payer = sessionPayer(session.credentialKind, session.payerId);
    const entries: LedgerEntry[] = [];
    let foreign = 0;
    for (const r of parsed.records) {
      if (r.engineSessionId && session.engineSessionId && r.engineSessionId !== session.engineSessionId) {
        foreign += 1;
        continue;
      }
      entries.push({
        meter: 'otel',
        // Per session: a record id is the engine's, and two sessions never share one.
        sourceId: `${session.id}:${r.sourceId}`,
        at: r.at,
        sessionId: session.id,
        workItem: session.workItem,
        // The turn running when the record was made: the last one started before it (else the latest).
        turnId: (await this.deps.store.turnAt(session.id, r.at))?.id ?? null,
        engine: session.engine,
        runner: session.runner,
        model: r.model,
        usage: r.usage,
        engineCostUsd: r.costUsd,
        payer,
      });
    }
    if (foreign > 0) {
      parsed.rejected += foreign;
      parsed.warnings.push(`${foreign} × records of another engine session than the token's (not counted)`);
    }
    if (entries.length === 0) return 0;
    // The rows and their turns' waiting drives, in one write.
    const added = await this.deps.ledger.add(entries, NO_TELEMETRY_YET);
    for (const warning of added.warnings) this.deps.logger.warn(warning, { session: session.id });
    return added.inserted;
  }
}

/** The answer to a post whose body was not read whole. */
function refuseBody(req: IncomingMessage, res: ServerResponse, why: BodyRefusal, max: number): void {
  if (why === 'too-large') reply(res, 413, `body is over the limit of ${max} bytes`, { connection: 'close' });
  // OTLP exporters retry a 503 after its Retry-After (OTLP/HTTP spec, "Retryable Response Codes").
  else if (why === 'busy') reply(res, 503, 'too many request bodies in flight', busyHeaders(req));
  else reply(res, 400, 'request body ended early');
}
