import type { AccountingDeps } from './accounting.js';
import type { ConnectorBackend, Terminal } from './backend.js';
import type { Binding, Grant } from './grant.js';
import { type BackendName, ConnectorError } from './names.js';
import { quoteName } from './resolve.js';

/**
 * One connection of an operator agent: its effective grant, the terminal a `single` grant bound when
 * it started, the backends it may reach, and where its calls are accounted. Built once per `the-loop
 * mcp` process (stdio) or per HTTP session; every tool call goes through `callTool` with it.
 */
export interface Connection {
  grant: Grant;
  binding: Binding | null;
  backends: ReadonlyMap<BackendName, ConnectorBackend>;
  accounting: AccountingDeps;
  /** Names close_terminal never closes: the daemon's own sessions, the terminal this server runs in. */
  protectedNames(): Promise<ReadonlySet<string>>;
  /** Masks the secrets the-loop knows (its tokens, keys) in whatever a tool returns. */
  scrub(text: string): string;
  /** Called with what a handler threw that was not a ConnectorError (a bug): logged, never shown raw. */
  onInternalError(tool: string, error: unknown): void;
}

/**
 * Every terminal of the granted backends (or of one of them), with the backends that did not answer
 * and why. A backend is asked whether it is available only when its list is empty (tmux lists
 * nothing when no server runs): one call on the way of every tool, not two.
 */
export async function listGranted(
  connection: Pick<Connection, 'grant' | 'backends'>,
  only?: BackendName,
): Promise<{ terminals: Terminal[]; unavailable: Array<{ backend: BackendName; reason: string }> }> {
  const terminals: Terminal[] = [];
  const unavailable: Array<{ backend: BackendName; reason: string }> = [];
  for (const backend of grantedBackends(connection)) {
    if (only && backend.name !== only) continue;
    let listed: Terminal[];
    try {
      listed = await backend.list();
    } catch (error) {
      if (!(error instanceof ConnectorError && error.code === 'E_BACKEND_UNAVAILABLE')) throw error;
      unavailable.push({ backend: backend.name, reason: error.message });
      continue;
    }
    if (listed.length === 0) {
      const ready = await backend.available();
      if (!ready.ok) unavailable.push({ backend: backend.name, reason: ready.reason });
    }
    terminals.push(...listed);
  }
  return { terminals, unavailable };
}

/** The granted backends, in the grant's order. */
export function grantedBackends(connection: Pick<Connection, 'grant' | 'backends'>): ConnectorBackend[] {
  return connection.grant.backends.flatMap((name) => {
    const backend = connection.backends.get(name);
    return backend ? [backend] : [];
  });
}

/**
 * What a `single` or `session` grant binds, resolved when the connection starts: the one terminal of
 * that name (every pane of a tmux session shares its identity), refused when there is none or
 * several. A terminal created later under that name is another terminal.
 */
export async function bindTarget(backends: readonly ConnectorBackend[], name: string): Promise<Binding> {
  const found: Terminal[] = [];
  const unavailable: string[] = [];
  for (const backend of backends) {
    const ready = await backend.available();
    if (!ready.ok) {
      unavailable.push(`${backend.name}: ${ready.reason}`);
      continue;
    }
    found.push(...(await backend.list()).filter((t) => t.name === name));
  }
  const identities = new Map(found.map((t) => [`${t.backend} ${t.identity}`, t]));
  if (identities.size === 1) {
    const t = found[0] as Terminal;
    return { backend: t.backend, name: t.name, identity: t.identity };
  }
  if (identities.size === 0)
    throw new ConnectorError(
      'E_TARGET_NOT_FOUND',
      `the grant binds the terminal ${quoteName(name)}, and there is none of that name${
        unavailable.length ? ` (${unavailable.join('; ')})` : ''
      }: start it, then start the connector`,
    );
  throw new ConnectorError(
    'E_TARGET_AMBIGUOUS',
    `the grant binds the terminal ${quoteName(name)}, and ${identities.size} terminals have that name: rename all but one`,
  );
}
