/**
 * The terminal connector's vocabulary (`the-loop mcp`), shared by the config schema, the grant rules
 * and the server: its backends, its scopes in order, its tools and the scope each tool needs. Pure data.
 */

export const BACKENDS = ['tmux', 'kitty'] as const;
export type BackendName = (typeof BACKENDS)[number];

/** Scopes in order: read < write < destroy. A grant of one scope allows the tools of the scopes below. */
export const SCOPES = ['read', 'write', 'destroy'] as const;
export type Scope = (typeof SCOPES)[number];

export const TOOL_NAMES = [
  'list_terminals',
  'read_terminal',
  'send_input',
  'run_command',
  'close_terminal',
] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

/**
 * The scope each tool needs. The gate looks a tool up here; a tool absent from this table is denied
 * (no tier, no call), so a tool added without a tier cannot be reached.
 */
export const TOOL_TIER: Readonly<Partial<Record<string, Scope>>> = {
  list_terminals: 'read',
  read_terminal: 'read',
  send_input: 'write',
  run_command: 'write',
  close_terminal: 'destroy',
};

/** Whether a tool's calls are drives (writes into a terminal): recorded as unmetered in the ledger. */
export const isDriveTool = (tool: string): boolean => {
  const tier = Object.hasOwn(TOOL_TIER, tool) ? TOOL_TIER[tool] : undefined;
  return tier === 'write' || tier === 'destroy';
};

export const scopeRank = (scope: Scope): number => SCOPES.indexOf(scope);

/**
 * Stable codes of the errors an agent can correct, returned as `isError` tool results (never thrown
 * to the client as protocol errors).
 */
export const ERROR_CODES = [
  /** The grant's scope, tools or backends do not cover the call (or it would close a protected terminal). */
  'E_SCOPE',
  /** The target exists but is outside the grant's targets (or is not the terminal a `single` grant bound). */
  'E_TARGET_NOT_BOUND',
  /** The backend is not installed, not running, or not reachable. */
  'E_BACKEND_UNAVAILABLE',
  /** The pane is in copy mode, on an alternate screen, dead, or not at a known shell prompt. */
  'E_PANE_BUSY',
  /** A key outside the grammar: never typed as text. */
  'E_UNKNOWN_KEY',
  /** No terminal of that id or name (among the granted backends). */
  'E_TARGET_NOT_FOUND',
  /** A name that matches several terminals: use the id from list_terminals. */
  'E_TARGET_AMBIGUOUS',
  /** The terminal went away between its resolution and its use. */
  'E_TARGET_GONE',
  /** A command did not end within its timeout (it was stopped; output so far is returned). */
  'E_TIMEOUT',
  /** An argument the schema admits but the call cannot use (empty send, oversized text). */
  'E_INVALID',
] as const;
export type ConnectorCode = (typeof ERROR_CODES)[number];

/**
 * An error the agent can correct. Backends and the gate throw it; the one wrapper around every tool
 * turns it into an `isError` result carrying the code.
 */
export class ConnectorError extends Error {
  readonly code: ConnectorCode;
  /** More for the agent (a timed-out command's output so far): shown in the result, never audited. */
  readonly more: string | undefined;
  constructor(code: ConnectorCode, message: string, more?: string) {
    super(message);
    this.name = 'ConnectorError';
    this.code = code;
    this.more = more;
  }
}
