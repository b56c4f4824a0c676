import { stripControls } from '../core/text.js';
import { workItemKey } from '../core/work-item.js';
import type { Binding, Grant, GrantRequest, RunLimits, TargetRule } from './grant.js';
import {
  type ConnectorCode,
  SCOPES,
  type Scope,
  scopeRank,
  TOOL_NAMES,
  TOOL_TIER,
  type ToolName,
} from './names.js';

/**
 * The grant rules of the terminal connector, pure: a connection's request narrowed against its
 * operator's ceiling (refused whole when it would widen anything, never clipped), and the one gate
 * every tool call passes (tier, scope, tools, backend, target, protected terminals).
 */

/** What the gate and the lists need of a terminal (backend.ts `Terminal` has these and more). */
export interface TargetTerminal {
  backend: string;
  name: string;
  identity: string;
}

export type NarrowResult = { ok: true; grant: Grant } | { ok: false; errors: string[] };
export type GateResult = { ok: true } | { ok: false; code: ConnectorCode; message: string };

/** The prefix every daemon session's tmux name starts with (runners/tmux: `loop-<slug>`). */
export const DAEMON_SESSION_PREFIX = 'loop-';

/** A name or a value from outside, safe in a message: controls gone, bounded, quoted. */
export function quoted(text: string, max = 80): string {
  const clean = stripControls(text).replace(/[\n\t]+/g, ' ');
  return JSON.stringify(clean.length > max ? `${clean.slice(0, max - 1)}…` : clean);
}

/** The tier a tool needs; undefined for a tool with none (own keys only: `toString` has no tier). */
export function tierOf(tool: string): Scope | undefined {
  return Object.hasOwn(TOOL_TIER, tool) ? TOOL_TIER[tool] : undefined;
}

/** Every tool a scope reaches (what a grant that names no tools gets). */
export function toolsWithin(scope: Scope): ToolName[] {
  return TOOL_NAMES.filter((t) => {
    const tier = tierOf(t);
    return tier !== undefined && scopeRank(tier) <= scopeRank(scope);
  });
}

/** The tools of `tools` whose tier is above `scope` (a config or a request naming them is refused). */
export function toolsAbove(tools: readonly string[], scope: Scope): string[] {
  return tools.filter((t) => {
    const tier = tierOf(t);
    return tier === undefined || scopeRank(tier) > scopeRank(scope);
  });
}

/**
 * The effective grant of a connection: the ceiling narrowed by what it asks for. Any dimension asked
 * wider than the ceiling refuses the whole request, with every reason — a connection never gets less
 * than it asked for without knowing.
 */
export function narrowGrant(ceiling: Grant, request: GrantRequest): NarrowResult {
  const errors: string[] = [];
  const backends = narrowBackends(ceiling, request, errors);
  const scope = narrowScope(ceiling, request, errors);
  const tools = narrowTools(ceiling, request, scope, errors);
  const targets = request.targets ?? ceiling.targets;
  if (request.targets !== undefined) {
    const why = targetOutside(ceiling.targets, request.targets);
    if (why) errors.push(`targets: ${why}`);
  }
  const run = narrowRun(ceiling.run, request.run ?? {}, errors);
  if (errors.length > 0) return { ok: false, errors };
  return { ok: true, grant: { operator: ceiling.operator, backends, scope, targets, tools, run } };
}

function narrowBackends(ceiling: Grant, request: GrantRequest, errors: string[]): Grant['backends'] {
  if (request.backends === undefined) return [...ceiling.backends];
  if (request.backends.length === 0) errors.push('backends: none asked for (leave it out for all granted)');
  const wider = request.backends.filter((b) => !ceiling.backends.includes(b));
  if (wider.length > 0) {
    errors.push(
      `backends: ${wider.map((b) => quoted(b)).join(', ')} not granted (granted: ${ceiling.backends.join(', ')})`,
    );
  }
  return [...new Set(request.backends)];
}

function narrowScope(ceiling: Grant, request: GrantRequest, errors: string[]): Scope {
  const asked = request.scope;
  if (asked === undefined) return ceiling.scope;
  if (!(SCOPES as readonly string[]).includes(asked)) {
    errors.push(`scope: ${quoted(String(asked))} is not a scope (${SCOPES.join(' < ')})`);
    return ceiling.scope;
  }
  if (scopeRank(asked) > scopeRank(ceiling.scope)) {
    errors.push(`scope: ${asked} is above the granted ${ceiling.scope}`);
  }
  return asked;
}

/**
 * Tools asked for must be granted and within the (narrowed) scope; none asked for: the granted tools
 * the narrowed scope still reaches.
 */
function narrowTools(ceiling: Grant, request: GrantRequest, scope: Scope, errors: string[]): ToolName[] {
  if (request.tools === undefined) return ceiling.tools.filter((t) => toolsAbove([t], scope).length === 0);
  if (request.tools.length === 0) errors.push('tools: none asked for (leave it out for all granted)');
  const wider = request.tools.filter((t) => !ceiling.tools.includes(t));
  if (wider.length > 0) {
    errors.push(`tools: ${wider.map((t) => quoted(t)).join(', ')} not granted`);
  }
  const above = toolsAbove(
    request.tools.filter((t) => !wider.includes(t)),
    scope,
  );
  if (above.length > 0) {
    errors.push(`tools: ${above.map((t) => quoted(t)).join(', ')} need a scope above ${scope}`);
  }
  return [...new Set(request.tools)];
}

function narrowRun(ceiling: RunLimits, asked: Partial<RunLimits>, errors: string[]): RunLimits {
  const limit = (key: 'timeoutSeconds' | 'maxOutputLines'): number => {
    const value = asked[key];
    if (value === undefined) return ceiling[key];
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
      errors.push(`run.${key}: ${quoted(String(value))} is not a positive number`);
    } else if (value > ceiling[key]) {
      errors.push(`run.${key}: ${value} is above the granted ${ceiling[key]}`);
    }
    return value;
  };
  const timeoutSeconds = limit('timeoutSeconds');
  const maxOutputLines = limit('maxOutputLines');
  if (asked.inPane === true && !ceiling.inPane) {
    errors.push('run.inPane: running in an existing pane is not granted');
  }
  return { timeoutSeconds, maxOutputLines, inPane: asked.inPane ?? ceiling.inPane };
}

/** A target rule's own problems (an empty prefix would match every name; an invalid work item). */
function targetProblem(rule: TargetRule): string | null {
  switch (rule.kind) {
    case 'any':
      return null;
    case 'single':
      return rule.name.length === 0 ? 'an empty terminal name' : null;
    case 'prefix':
      if (rule.prefixes.length === 0) return 'no prefix given';
      return rule.prefixes.some((p) => p.length === 0) ? 'an empty prefix (it would match every name)' : null;
    case 'session':
      return canonicalWorkItem(rule.workItem) === null ? `${quoted(rule.workItem)} is not a work item` : null;
    default:
      return 'an unknown kind of target';
  }
}

function canonicalWorkItem(text: string): string | null {
  try {
    return workItemKey(text);
  } catch {
    return null;
  }
}

/** Why `asked` reaches beyond `ceiling` (or is malformed); null when it stays within. */
export function targetOutside(ceiling: TargetRule, asked: TargetRule): string | null {
  const problem = targetProblem(asked);
  if (problem) return problem;
  switch (ceiling.kind) {
    case 'any':
      return null;
    case 'prefix':
      return outsidePrefixes(ceiling.prefixes, asked);
    case 'single':
      return asked.kind === 'single' && asked.name === ceiling.name
        ? null
        : `only the terminal ${quoted(ceiling.name)} is granted`;
    case 'session': {
      const mine = canonicalWorkItem(ceiling.workItem);
      return asked.kind === 'session' && mine !== null && canonicalWorkItem(asked.workItem) === mine
        ? null
        : `only the session of ${quoted(ceiling.workItem)} is granted`;
    }
    default:
      return 'the granted targets are of an unknown kind';
  }
}

function outsidePrefixes(granted: readonly string[], asked: TargetRule): string | null {
  const under = (name: string) => granted.some((p) => p.length > 0 && name.startsWith(p));
  const list = granted.map((p) => quoted(p)).join(', ');
  switch (asked.kind) {
    case 'any':
      return `any terminal asked for, but only names starting with ${list} are granted`;
    case 'prefix': {
      const wider = asked.prefixes.filter((p) => !under(p));
      return wider.length === 0
        ? null
        : `${wider.map((p) => quoted(p)).join(', ')} not within the granted prefixes ${list}`;
    }
    case 'single':
      return under(asked.name)
        ? null
        : `${quoted(asked.name)} does not start with a granted prefix (${list})`;
    case 'session':
      // A daemon session is named `loop-<slug>`, its slug known only to the registry: a session is
      // within the prefixes only when every `loop-` name is.
      return under(DAEMON_SESSION_PREFIX)
        ? null
        : `a daemon session (named ${DAEMON_SESSION_PREFIX}…) is not within the granted prefixes ${list}`;
    default:
      return 'an unknown kind of target';
  }
}

export interface GateInput {
  grant: Grant;
  /** The terminal a `single` or `session` grant bound when the connection started (null: none found). */
  binding: Binding | null;
  tool: string;
  /** The terminal the call acts on, as resolved by the server (none for `list_terminals`). */
  terminal?: TargetTerminal | undefined;
  /** Names the connector never closes: the daemon's own sessions. */
  protectedNames?: ReadonlySet<string> | undefined;
}

const refuse = (code: ConnectorCode, message: string): GateResult => ({ ok: false, code, message });

/**
 * The one gate every tool call passes, in order: the tool has a tier (none: denied), its tier is
 * within the grant's scope, the grant names it; then, for a call on a terminal, its backend is
 * granted, it is within the grant's targets, and a destroying tool does not touch a protected name.
 */
export function gateCall(input: GateInput): GateResult {
  const { grant, tool, terminal } = input;
  const tier = tierOf(tool);
  if (tier === undefined) return refuse('E_SCOPE', `the tool ${quoted(tool)} has no tier: denied`);
  if (scopeRank(tier) > scopeRank(grant.scope)) {
    return refuse('E_SCOPE', `${quoted(tool)} needs scope ${tier}; this connection has ${grant.scope}`);
  }
  if (!(grant.tools as readonly string[]).includes(tool)) {
    return refuse(
      'E_SCOPE',
      `${quoted(tool)} is not among this connection's tools (${grant.tools.join(', ')})`,
    );
  }
  if (!terminal) return { ok: true };
  if (!(grant.backends as readonly string[]).includes(terminal.backend)) {
    return refuse(
      'E_SCOPE',
      `the ${quoted(terminal.backend)} backend is not granted (granted: ${grant.backends.join(', ')})`,
    );
  }
  const outside = targetRefusal(grant.targets, input.binding, terminal);
  if (outside) return refuse('E_TARGET_NOT_BOUND', outside);
  if (tier === 'destroy' && input.protectedNames?.has(terminal.name)) {
    return refuse(
      'E_SCOPE',
      `${quoted(terminal.name)} is one of the daemon's own sessions: never closed here`,
    );
  }
  return { ok: true };
}

/** Whether a listed terminal is one this grant reaches (list_terminals shows only those). */
export function terminalInGrant(grant: Grant, binding: Binding | null, terminal: TargetTerminal): boolean {
  return (
    (grant.backends as readonly string[]).includes(terminal.backend) &&
    targetRefusal(grant.targets, binding, terminal) === null
  );
}

/** Why `terminal` is outside the targets; null when within. */
function targetRefusal(rule: TargetRule, binding: Binding | null, terminal: TargetTerminal): string | null {
  const name = quoted(terminal.name);
  switch (rule.kind) {
    case 'any':
      return null;
    case 'prefix':
      // An exact prefix: `loop-a` reaches `loop-a-b` (that is what a prefix is); a look-alike
      // character (U+2010 for `-`) is another character and matches nothing.
      return rule.prefixes.some((p) => p.length > 0 && terminal.name.startsWith(p))
        ? null
        : `${name} is outside this connection's targets (names starting with ${rule.prefixes.map((p) => quoted(p)).join(', ')})`;
    case 'single':
    case 'session':
      return bindingRefusal(binding, terminal);
    default:
      return 'this connection has targets of an unknown kind';
  }
}

/** A bound grant reaches its bound terminal only: same backend, same name, same identity. */
function bindingRefusal(binding: Binding | null, terminal: TargetTerminal): string | null {
  const name = quoted(terminal.name);
  if (!binding) return `no terminal is bound to this connection, so ${name} is not reachable`;
  const sameName = terminal.name === binding.name;
  const sameIdentity = terminal.identity === binding.identity;
  if (terminal.backend === binding.backend && sameName && sameIdentity) return null;
  if (terminal.backend === binding.backend && sameName) {
    return `${name} was re-created since this connection bound it (another terminal of the same name): not bound`;
  }
  if (terminal.backend === binding.backend && sameIdentity) {
    return `the bound terminal was renamed (now ${name}, bound as ${quoted(binding.name)}): not bound`;
  }
  return `${name} is not the terminal bound to this connection (${quoted(binding.name)})`;
}
