import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { isLoopbackHost, MAX_SESSIONS, SESSION_IDLE_MS, tokenFileStem } from './connector/http/http-rules.js';
import { type McpListener, startMcpListener } from './connector/http/listener.js';
import { SessionTable } from './connector/http/sessions.js';
import { claimTokenFile } from './connector/http/token-file.js';
import { createConnectorServer } from './connector/server.js';
import { LoopError } from './core/errors.js';
import type { Base } from './main-base.js';
import { effectiveGrant, type McpServeOptions, openConnection } from './main-mcp.js';

/**
 * `the-loop mcp --http`: the terminal connector over Streamable HTTP on a loopback address. Part of
 * the composition root: the grant is narrowed once at start (a wider ask refuses to start, as on
 * stdio), a bearer token is minted for it and written to a private file, and each MCP session opens
 * its own connection with `openConnection` (its own backends, binding and connection id).
 */

export interface McpHttpOptions extends Omit<McpServeOptions, 'stdin' | 'stdout'> {
  host: string;
  /** 0: any free port. */
  port: number;
}

export interface McpHttpServing {
  url: string;
  /** The file holding the bearer token (0600; removed by `close`). */
  tokenFile: string;
  operator: string;
  /** Resolves once the server has stopped, whoever stopped it (the listener closing stops it too). */
  done: Promise<void>;
  /** End every session, dispose their backends, stop listening, remove the token file. Idempotent. */
  close(): Promise<void>;
}

export async function serveMcpHttp(base: Base, options: McpHttpOptions): Promise<McpHttpServing> {
  if (!isLoopbackHost(options.host))
    throw new LoopError(
      'usage',
      `--host must be a loopback address (127.0.0.1, ::1, localhost), not ${options.host}`,
      {
        hint: 'the connector drives terminals on this machine: it is served to this machine only',
      },
    );
  const grant = effectiveGrant(base, options.operator, options.request);
  // 256 bits; registered with the scrubber so no log line or tool result can carry it.
  const token = randomBytes(32).toString('base64url');
  base.scrubber.add(token);
  const sessions = new SessionTable({
    max: MAX_SESSIONS,
    idleMs: SESSION_IDLE_MS,
    logger: base.logger,
    open: async () => {
      const { connection, dispose } = await openConnection(base, {
        operator: grant.operator,
        request: options.request,
        env: options.env,
      });
      return {
        server: createConnectorServer(connection, { version: options.version }),
        connection: connection.accounting.connection,
        dispose,
      };
    },
  });
  const tokenFile = claimTokenFile(join(base.loaded.dataDir, 'mcp'), tokenFileStem(grant), token);
  let listener: McpListener;
  try {
    listener = await startMcpListener({
      host: options.host,
      port: options.port,
      token,
      sessions,
      logger: base.logger,
    });
  } catch (error) {
    await sessions.closeAll();
    tokenFile.remove();
    throw error;
  }
  let closing: Promise<void> | null = null;
  const close = () => {
    closing ??= (async () => {
      await sessions.closeAll();
      await listener.close();
      tokenFile.remove();
      base.logger.info('connector stopped serving over HTTP', { operator: grant.operator });
    })();
    return closing;
  };
  base.logger.info('connector serving over HTTP', {
    operator: grant.operator,
    url: listener.url,
    scope: grant.scope,
    targets: grant.targets.kind,
  });
  return {
    url: listener.url,
    tokenFile: tokenFile.path,
    operator: grant.operator,
    done: listener.closed.then(close),
    close,
  };
}
