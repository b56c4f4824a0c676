import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { grantOf } from './config/connector-schema.js';
import { loadAuditKey } from './connector/audit-key.js';
import type { ConnectorBackend } from './connector/backend.js';
import { bindTarget, type Connection } from './connector/connection.js';
import type { Binding, Grant, GrantRequest } from './connector/grant.js';
import { narrowGrant } from './connector/grant-rules.js';
import { KittyBackend } from './connector/kitty/kitty-backend.js';
import { type BackendName, ConnectorError } from './connector/names.js';
import { createConnectorServer } from './connector/server.js';
import { TmuxBackend } from './connector/tmux/tmux-backend.js';
import { LoopError } from './core/errors.js';
import type { Base } from './main-base.js';

/**
 * `the-loop mcp`: the terminal connector for one operator agent, over stdio. Part of the composition
 * root: it builds the backends, narrows the operator's grant by what this connection asks for (a
 * wider ask refuses to start), binds a `single` or `session` target, and serves until the client
 * closes its end or a signal stops it (either way the backends are disposed: no child left behind).
 */

export interface McpServeOptions {
  operator?: string | undefined;
  request: GrantRequest;
  env: Readonly<Record<string, string | undefined>>;
  version: string;
  stdin: Readable;
  stdout: Writable;
  /** Resolves when the server must stop though the client has not closed (SIGTERM, SIGINT). */
  stop?: Promise<void>;
}

/** The operator's ceiling narrowed by the request: the connection's grant, or a usage error listing why not. */
export function effectiveGrant(base: Base, operator: string | undefined, request: GrantRequest): Grant {
  const operators = base.loaded.config.connector.operators;
  const names = Object.keys(operators);
  if (names.length === 0)
    throw new LoopError('config-invalid', 'no operator is declared, so the connector grants nothing', {
      hint: 'declare one under connector.operators in the config (docs/connector.md), then: the-loop mcp --operator <name>',
    });
  const name = operator ?? (names.length === 1 ? names[0] : undefined);
  if (name === undefined)
    throw new LoopError(
      'usage',
      `several operators are declared (${names.join(', ')}): say which with --operator`,
    );
  const declared = Object.hasOwn(operators, name) ? operators[name] : undefined;
  if (!declared)
    throw new LoopError(
      'usage',
      `no operator ${JSON.stringify(name)} is declared (declared: ${names.join(', ')})`,
    );
  const narrowed = narrowGrant(grantOf(name, declared), request);
  if (!narrowed.ok)
    throw new LoopError(
      'usage',
      `this connection asks for more than operator ${name} is granted:\n  ${narrowed.errors.join('\n  ')}`,
      {
        hint: 'ask for less, or widen the operator in the config (`the-loop mcp grants` shows what each has)',
      },
    );
  return narrowed.grant;
}

export function connectorBackends(
  base: Base,
  env: McpServeOptions['env'],
): Map<BackendName, ConnectorBackend> {
  const { connector, tmux } = base.loaded.config;
  const backends = new Map<BackendName, ConnectorBackend>();
  backends.set('tmux', new TmuxBackend({ socket: connector.tmux?.socket ?? tmux.socket }));
  backends.set('kitty', new KittyBackend({ to: connector.kitty?.to ?? env.KITTY_LISTEN_ON }));
  return backends;
}

type AgentSessions = Map<string, { sessionId: string; workItem: string }>;

/**
 * The daemon's sessions by tmux name (active ones): what a drive is charged to, what is never
 * closed. Read at most once a second for accounting (a list of terminals asks for each of them),
 * afresh before a close.
 */
function agentSessionsOf(base: Base): (fresh?: boolean) => Promise<AgentSessions> {
  let cached: { at: number; map: Promise<AgentSessions> } | null = null;
  return (fresh = false) => {
    if (!fresh && cached && Date.now() - cached.at < 1000) return cached.map;
    const map = base.sessions.list({ status: 'active' }).then((sessions) => {
      const byName: AgentSessions = new Map();
      for (const s of sessions)
        if (s.tmuxTarget) byName.set(s.tmuxTarget, { sessionId: s.id, workItem: s.workItem });
      return byName;
    });
    cached = { at: Date.now(), map };
    map.catch(() => {
      cached = null;
    });
    return map;
  };
}

async function bindingFor(base: Base, grant: Grant, backends: ConnectorBackend[]): Promise<Binding | null> {
  const rule = grant.targets;
  if (rule.kind === 'single') return bindTarget(backends, rule.name);
  if (rule.kind !== 'session') return null;
  const session = await base.sessions.findActive(rule.workItem);
  if (!session?.tmuxTarget)
    throw new ConnectorError(
      'E_TARGET_NOT_FOUND',
      `the grant binds the session of ${rule.workItem}, and it has no active tmux session`,
    );
  return bindTarget(
    backends.filter((b) => b.name === 'tmux'),
    session.tmuxTarget,
  );
}

export async function openConnection(
  base: Base,
  options: Omit<McpServeOptions, 'stdin' | 'stdout' | 'version'>,
) {
  const grant = effectiveGrant(base, options.operator, options.request);
  const backends = connectorBackends(base, options.env);
  const granted = grant.backends.flatMap((b) =>
    backends.has(b) ? [backends.get(b) as ConnectorBackend] : [],
  );
  let binding: Binding | null;
  try {
    binding = await bindingFor(base, grant, granted);
  } catch (error) {
    if (error instanceof ConnectorError) throw new LoopError('usage', error.message);
    throw error;
  }
  const ownPane = options.env.TMUX_PANE;
  const agentSessions = agentSessionsOf(base);
  const connection: Connection = {
    grant,
    binding,
    backends,
    accounting: {
      audit: base.drives,
      ledger: base.ledger,
      operator: grant.operator,
      digestKey: loadAuditKey(join(base.loaded.dataDir, 'mcp')),
      connection: randomUUID().slice(0, 8),
      agentSession: async (name) => (await agentSessions()).get(name) ?? null,
    },
    protectedNames: async () => {
      // Fresh: a session the daemon started a moment ago is protected too.
      const names = new Set((await agentSessions(true)).keys());
      // The terminal this server runs in (an agent inside tmux): closing it would end the caller.
      const own = ownPane ? (await backends.get('tmux')?.list())?.find((t) => t.id === ownPane) : undefined;
      if (own) names.add(own.name);
      return names;
    },
    scrub: base.scrubber.scrub,
    onInternalError: (tool, error) =>
      base.logger.error('connector tool failed', {
        tool,
        error: error instanceof Error ? (error.stack ?? error.message) : String(error),
      }),
  };
  return { connection, dispose: () => Promise.all([...backends.values()].map((b) => b.dispose())) };
}

/** Serve one connection over stdio until the client closes; resolves when it has. */
export async function serveMcpStdio(base: Base, options: McpServeOptions): Promise<void> {
  const { connection, dispose } = await openConnection(base, options);
  const server = createConnectorServer(connection, { version: options.version });
  const transport = new StdioServerTransport(options.stdin, options.stdout);
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    options.stdin.once('end', () => resolve());
    void options.stop?.then(() => resolve());
  });
  await server.connect(transport);
  base.logger.info('connector serving', {
    operator: connection.grant.operator,
    connection: connection.accounting.connection,
    scope: connection.grant.scope,
    targets: connection.grant.targets.kind,
  });
  await closed;
  await server.close().catch(() => {});
  await dispose();
}
