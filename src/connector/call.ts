import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { toJson } from '../core/text.js';
import { account, payloadOf } from './accounting.js';
import type { Terminal } from './backend.js';
import { type Connection, listGranted } from './connection.js';
import { gateCall } from './grant-rules.js';
import { HANDLERS } from './handlers.js';
import { ConnectorError } from './names.js';
import { resolveTarget } from './resolve.js';
import type { ToolDef } from './tool-defs.js';

/**
 * The one gate every tool call passes (server.ts registers nothing else): the grant is checked for the
 * tool (its tier, the grant's tools) before anything is looked up, the target is resolved by the
 * server to a listed terminal and checked against the grant's targets, and only then does the
 * handler run — with the resolved terminal, never the agent's string. Every call is accounted; what
 * the agent can correct comes back as an `isError` result with a stable code.
 */
export async function callTool(
  connection: Connection,
  def: ToolDef,
  args: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<CallToolResult> {
  const { grant, binding } = connection;
  const payload = payloadOf(args);
  let terminal: Terminal | null = null;
  try {
    const tool = gateCall({ grant, binding, tool: def.name });
    if (!tool.ok) return await refuse(connection, def, payload, null, tool.code, tool.message);
    if (def.targeted) {
      terminal = await resolveGranted(connection, String(args.target));
      const protectedNames = def.name === 'close_terminal' ? await connection.protectedNames() : undefined;
      const gate = gateCall({ grant, binding, tool: def.name, terminal, protectedNames });
      if (!gate.ok) return await refuse(connection, def, payload, terminal, gate.code, gate.message);
    }
    const handler = HANDLERS[def.name];
    const { structured, detail } = await handler(connection, terminal, args, signal);
    const clean = scrubDeep(structured, connection.scrub) as Record<string, unknown>;
    await account(connection.accounting, {
      tool: def.name,
      payload,
      terminal,
      outcome: 'ok',
      code: null,
      detail,
    });
    return { content: [{ type: 'text', text: toJson(clean) }], structuredContent: clean };
  } catch (error) {
    if (!(error instanceof ConnectorError)) connection.onInternalError(def.name, error);
    const code = error instanceof ConnectorError ? error.code : 'E_INTERNAL';
    const message =
      error instanceof ConnectorError
        ? error.message
        : 'the connector failed on this call (see the-loop log)';
    // Before the target resolved nothing was written: a refusal. After, the call may have written.
    const outcome = terminal === null ? 'refused' : 'error';
    await account(connection.accounting, {
      tool: def.name,
      payload,
      terminal,
      outcome,
      code,
      detail: message,
    });
    const more = error instanceof ConnectorError && error.more ? `\n${error.more}` : '';
    return errorResult(code, connection.scrub(message + more));
  }
}

async function refuse(
  connection: Connection,
  def: ToolDef,
  payload: unknown,
  terminal: Terminal | null,
  code: string,
  message: string,
): Promise<CallToolResult> {
  await account(connection.accounting, {
    tool: def.name,
    payload,
    terminal,
    outcome: 'refused',
    code,
    detail: message,
  });
  return errorResult(code, connection.scrub(message));
}

function errorResult(code: string, message: string): CallToolResult {
  // No structuredContent: a client checks any it gets against the tool's output schema.
  return { isError: true, content: [{ type: 'text', text: `${code}: ${message}` }], _meta: { code } };
}

/**
 * The agent's target resolved among the terminals of the granted backends that answer. A backend the
 * grant does not name is never listed; an id of one is refused (E_SCOPE); when nothing matches and a
 * granted backend did not answer, that is the error (E_BACKEND_UNAVAILABLE), not "not found".
 */
async function resolveGranted(connection: Connection, target: string): Promise<Terminal> {
  if (target.startsWith('kitty:') && !connection.grant.backends.includes('kitty'))
    throw new ConnectorError('E_SCOPE', 'the grant does not include the kitty backend');
  const { terminals, unavailable } = await listGranted(connection);
  try {
    return resolveTarget(terminals, target);
  } catch (error) {
    if (error instanceof ConnectorError && error.code === 'E_TARGET_NOT_FOUND' && unavailable.length > 0)
      throw new ConnectorError(
        'E_BACKEND_UNAVAILABLE',
        `${error.message} (${unavailable.map((u) => `${u.backend}: ${u.reason}`).join('; ')})`,
      );
    throw error;
  }
}

/** Every string of a result with the known secrets masked (the result's shape is unchanged). */
export function scrubDeep(value: unknown, scrub: (text: string) => string): unknown {
  if (typeof value === 'string') return scrub(value);
  if (Array.isArray(value)) return value.map((v) => scrubDeep(v, scrub));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, scrubDeep(v, scrub)]));
  return value;
}
