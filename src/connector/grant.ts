import type { BackendName, Scope, ToolName } from './names.js';

/**
 * A grant: what an operator agent may do through the connector. Declared per operator in the config
 * (the ceiling); a connection may ask for less (the request); the effective grant is their
 * intersection, and a request that would widen any dimension is refused when it is made, never
 * clipped (grant-rules.ts). Plain data.
 */

export type TargetRule =
  /** One terminal, by name; bound to its identity when the connection starts. */
  | { kind: 'single'; name: string }
  /** One of the daemon's own sessions (a `loop-*` tmux session), by work item (`github:o/r#12`). */
  | { kind: 'session'; workItem: string }
  /** Terminals whose name starts with one of these (`loop-`). */
  | { kind: 'prefix'; prefixes: string[] }
  | { kind: 'any' };

export interface RunLimits {
  /** The longest a `run_command` may wait, in seconds (a call may ask for less). */
  timeoutSeconds: number;
  /** The most output lines a `run_command` returns. */
  maxOutputLines: number;
  /** Whether `run_command` may type into an existing pane (`where: pane`), not only run in a new one. */
  inPane: boolean;
}

export interface Grant {
  operator: string;
  backends: BackendName[];
  scope: Scope;
  targets: TargetRule;
  /** The tools allowed (each also needs its tier within `scope`). */
  tools: ToolName[];
  run: RunLimits;
}

/** What a connection asks for: each dimension given narrows the ceiling, or the request is refused. */
export interface GrantRequest {
  backends?: BackendName[] | undefined;
  scope?: Scope | undefined;
  targets?: TargetRule | undefined;
  tools?: ToolName[] | undefined;
  run?: Partial<RunLimits> | undefined;
}

/**
 * A `single` (or `session`) grant's terminal as bound when the connection started: its backend, its
 * name and its identity (backend.ts `Terminal.identity`). A terminal with that name but another
 * identity (killed and re-created) is not it.
 */
export interface Binding {
  backend: BackendName;
  name: string;
  identity: string;
}
