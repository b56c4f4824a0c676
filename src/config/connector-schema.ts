import { z } from 'zod';
import type { Grant, TargetRule } from '../connector/grant.js';
import { toolsAbove, toolsWithin } from '../connector/grant-rules.js';
import { BACKENDS, SCOPES, TOOL_NAMES } from '../connector/names.js';
import { workItemKey } from '../core/work-item.js';

/**
 * `connector:` — the terminal connector (`the-loop mcp`, docs/connector.md): where its backends are
 * reached, and per operator the ceiling of what an operator agent may do (backends × scope × targets
 * × tools × run limits). A connection may ask for less, never more (connector/grant-rules.ts). No
 * operator declared: the connector refuses to start. Targets have no default: an operator reaches
 * nothing it was not explicitly given.
 */

/** Control, bidi and separator characters: a name holding one would not read as what it matches. */
const UNSHOWABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

/** A terminal name (tmux session name, kitty window title) or the start of one. */
const terminalName = (what: string) =>
  z
    .string()
    .min(1, `an empty ${what} would match every name`)
    .max(200)
    .refine((s) => !UNSHOWABLE.test(s), `a ${what} holds no control, bidi or separator character`);

const workItem = z
  .string()
  .max(200)
  .superRefine((text, ctx) => {
    try {
      workItemKey(text);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
    }
  })
  .transform((text) => workItemKey(text));

const targetsSchema = z
  .union([
    z.literal('any').describe('Every terminal of the granted backends.'),
    z
      .object({ single: terminalName('terminal name') })
      .strict()
      .describe(
        'One terminal by name, bound to its identity when a connection starts (a re-created one is not it).',
      ),
    z
      .object({ session: workItem })
      .strict()
      .describe(
        "One of the daemon's own sessions (its loop-* tmux session), by work item: github:owner/repo#12.",
      ),
    z
      .object({ prefixes: z.array(terminalName('prefix')).min(1).max(50) })
      .strict()
      .describe('Terminals whose name starts with one of these (exactly: "loop-" reaches "loop-a-b").'),
  ])
  .describe('Which terminals the operator reaches. Required: there is no default reach.');

const runSchema = z
  .object({
    timeoutSeconds: z
      .number()
      .min(1)
      .max(3600)
      .default(60)
      .describe('The longest a run_command may wait (a call may ask for less).'),
    maxOutputLines: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .default(2000)
      .describe('The most output lines a run_command returns.'),
    inPane: z
      .boolean()
      .default(false)
      .describe(
        'Whether run_command may type into an existing pane (at a shell prompt), not only a new one.',
      ),
  })
  .strict()
  .prefault({});

export const operatorSchema = z
  .object({
    backends: z
      .array(z.enum(BACKENDS))
      .min(1)
      .max(BACKENDS.length)
      .default(['tmux'])
      .describe('Backends the operator may drive.'),
    scope: z
      .enum(SCOPES)
      .default('read')
      .describe('read (list, read) < write (send, run) < destroy (close): each allows the ones below it.'),
    targets: targetsSchema,
    tools: z
      .array(z.enum(TOOL_NAMES))
      .min(1)
      .max(TOOL_NAMES.length * 2)
      .optional()
      .describe('The tools allowed (default: every tool within scope). A tool above scope is an error.'),
    run: runSchema,
  })
  .strict()
  .superRefine((op, ctx) => {
    const above = toolsAbove(op.tools ?? [], op.scope);
    if (above.length > 0) {
      ctx.addIssue({
        code: 'custom',
        path: ['tools'],
        message: `${above.join(', ')} need${above.length === 1 ? 's' : ''} a scope above ${op.scope}: raise scope, or leave ${above.length === 1 ? 'it' : 'them'} out`,
      });
    }
  });

const OPERATOR_NAME = /^[a-z][a-z0-9-]{0,39}$/;

export const connectorSchema = z
  .object({
    tmux: z
      .object({
        socket: z
          .string()
          .regex(/^[A-Za-z0-9._-]{1,100}$/, 'a tmux socket name (tmux -L <name>)')
          .optional()
          .describe("tmux server socket (-L) the connector drives. Default: the daemon's tmux.socket."),
      })
      .strict()
      .prefault({}),
    kitty: z
      .object({
        to: z
          .string()
          .max(300)
          .regex(
            /^(?:unix:[^\s\u0000-\u001f]+|tcp:[A-Za-z0-9.:[\]-]+:\d{1,5})$/,
            'unix:<path> or tcp:<host>:<port>',
          )
          .optional()
          .describe('kitty remote-control address (kitty --listen-on). Default: $KITTY_LISTEN_ON.'),
      })
      .strict()
      .prefault({}),
    operators: z
      .record(
        z.string().regex(OPERATOR_NAME, 'operator names are lower-case [a-z0-9-], at most 40'),
        operatorSchema,
      )
      .default({})
      .refine((ops) => Object.keys(ops).length <= 100, 'at most 100 operators')
      .describe(
        'Operator agents and the ceiling of what each may do. None: `the-loop mcp` refuses to start.',
      ),
  })
  .strict()
  .prefault({});

export type ConnectorConfig = z.output<typeof connectorSchema>;
export type OperatorConfig = z.output<typeof operatorSchema>;

function targetRule(targets: OperatorConfig['targets']): TargetRule {
  if (targets === 'any') return { kind: 'any' };
  if ('single' in targets) return { kind: 'single', name: targets.single };
  if ('session' in targets) return { kind: 'session', workItem: targets.session };
  return { kind: 'prefix', prefixes: [...new Set(targets.prefixes)] };
}

/** An operator's declared ceiling as a `Grant` (tools not named: every tool within its scope). */
export function grantOf(name: string, op: OperatorConfig): Grant {
  return {
    operator: name,
    backends: [...new Set(op.backends)],
    scope: op.scope,
    targets: targetRule(op.targets),
    tools: op.tools ? [...new Set(op.tools)] : toolsWithin(op.scope),
    run: { ...op.run },
  };
}

/** Every declared operator's ceiling, by name order. */
export function operatorGrants(connector: Pick<ConnectorConfig, 'operators'>): Grant[] {
  return Object.keys(connector.operators)
    .sort()
    .map((name) => grantOf(name, connector.operators[name] as OperatorConfig));
}
