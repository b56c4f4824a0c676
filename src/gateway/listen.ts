import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Config } from '../config/schema.js';
import { LoopError } from '../core/errors.js';
import type { SessionStore } from '../core/ports/sessions.js';
import { parseWorkItem } from '../core/work-item.js';
import type { Logger } from '../log/logger.js';
import { ensurePrivateDirs, ensureRuntimeDir, removeIfEmpty, runtimeDirOf } from '../os/runtime-dir.js';
import type { GatewayEndpoint } from './engine-env.js';
import { type Gateway, type GatewayRoutes, startGateway } from './server.js';
import type { GatewayTokens } from './tokens.js';
import type { GatewayPorts, GatewaySession } from './types.js';

/**
 * The gateway of a data dir, started by whoever dispatches (the daemon, or a `run` without one) and
 * stopped with it. Engines started while it listens get its address; a tmux session keeps the one
 * it started with, so the configured port is taken when it is free.
 */
export class GatewayService {
  private running: Gateway | undefined;

  constructor(
    private readonly deps: {
      config: Config;
      dataDir: string;
      /** The environment the runtime directory (the default socket's) is found from (TMPDIR). */
      env: Readonly<Record<string, string | undefined>>;
      logger: Logger;
      store: SessionStore;
      tokens: GatewayTokens;
      ports: GatewayPorts;
      routes: GatewayRoutes;
      /** Called when the listeners close (the handlers' pooled connections). */
      onClose?: () => void;
    },
  ) {}

  /** Where engines reach it now; undefined when it is not listening. */
  endpoint(): GatewayEndpoint | undefined {
    return this.running ? { url: this.running.url, socketPath: this.running.socketPath } : undefined;
  }

  /** The active session a capability token stands for. */
  async authorize(token: string): Promise<GatewaySession | undefined> {
    const id = await this.deps.tokens.sessionOf(token);
    const session = id ? await this.deps.store.get(id) : undefined;
    if (session?.status !== 'active') return undefined;
    const item = parseWorkItem(session.workItem);
    return {
      id: session.id,
      workItem: session.workItem,
      owner: item.owner,
      repo: item.repo,
      engine: session.engine,
      cwd: session.cwd,
    };
  }

  /**
   * Listen (no-op when disabled or already listening). A port in use is an error, never a quiet
   * move to another one: TUIs and engines keep the address they were given, and whoever took the
   * port would receive their requests, tokens included.
   */
  async start(): Promise<void> {
    const { config, logger } = this.deps;
    if (!config.gateway.enabled || this.running) return;
    const socketPath = gatewaySocketPath(config, this.deps.dataDir, this.deps.env);
    if (Buffer.byteLength(socketPath) > 107) {
      throw new LoopError(
        'config-invalid',
        `the gateway socket path ${socketPath} is too long for a Unix socket`,
        {
          hint: 'Set gateway.socket to a shorter path (at most 107 bytes), or TMPDIR to a shorter directory.',
        },
      );
    }
    // Its own directory: the sandbox binds the directory, so a socket made anew is seen inside.
    if (config.gateway.socket) {
      mkdirSync(dirname(socketPath), { recursive: true, mode: 0o700 });
    } else {
      ensureRuntimeDir(this.deps.env, this.deps.dataDir);
      ensurePrivateDirs([dirname(socketPath)]);
    }
    try {
      this.running = await startGateway({
        host: config.gateway.host,
        port: config.gateway.port,
        socketPath,
        logger,
        authorize: (token) => this.authorize(token),
        ports: this.deps.ports,
        routes: this.deps.routes,
        // Longer than the handlers' own: an engine waiting on a slow answer is not cut by the listener.
        idleTimeoutMs: config.gateway.idleTimeoutSeconds * 1000 + 30_000,
        // Two of the largest bodies read whole (a checked model request, a GitHub API call) at once.
        maxBufferedBytes: 2 * config.gateway.maxBodyBytes,
      });
    } catch (error) {
      if (error instanceof LoopError) throw error;
      const code = (error as NodeJS.ErrnoException).code;
      throw new LoopError(
        'config-invalid',
        `the gateway cannot listen on ${config.gateway.host}:${config.gateway.port}: ${code ?? String(error)}`,
        {
          cause: error,
          hint:
            code === 'EADDRINUSE'
              ? 'Another process uses that port (another the-loop daemon?): stop it, or set gateway.port (0: any free port, for setups without the tmux runner).'
              : 'Check gateway.host and gateway.port.',
        },
      );
    }
    logger.info('gateway listening', { url: this.running.url, socket: this.running.socketPath });
  }

  async stop(): Promise<void> {
    const running = this.running;
    this.running = undefined;
    await running?.close();
    if (running) this.deps.onClose?.();
    // The default socket's directories go with it (a stopped daemon or `run` leaves nothing in /tmp).
    if (running?.socketPath && !this.deps.config.gateway.socket) {
      removeIfEmpty(dirname(running.socketPath));
      removeIfEmpty(dirname(dirname(running.socketPath)));
    }
  }
}

/**
 * Where the gateway's Unix socket lives: `gateway.socket`, or a directory of its own in the data
 * dir's runtime directory (`<tmp>/the-loop-<uid>/<8 hex>/gateway/gh.sock`, short whatever HOME is).
 */
export const gatewaySocketPath = (
  config: Config,
  dataDir: string,
  env: Readonly<Record<string, string | undefined>>,
): string => config.gateway.socket ?? join(runtimeDirOf(env, dataDir), 'gateway', 'gh.sock');
