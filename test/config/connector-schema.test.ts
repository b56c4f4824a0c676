/**
 * `connector:` in the config: defaults (no operator: nothing reachable), each target form, the
 * conversion to a Grant, and malformed or hostile config refused with the key that is wrong.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connectorSchema, grantOf, operatorGrants } from '../../src/config/connector-schema.js';
import { loadConfig } from '../../src/config/load.js';
import { configJsonSchema } from '../../src/config/schema.js';
import { makeProject } from '../helpers/cli.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function load(config: Record<string, unknown>) {
  const project = makeProject(config);
  cleanups.push(project.cleanup);
  return loadConfig({ cwd: project.dir, env: {}, configPath: project.configPath });
}

/** The error a `connector:` section makes (its messages joined), or '' when it parses. */
function problems(connector: unknown): string {
  const result = connectorSchema.safeParse(connector);
  return result.success ? '' : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('\n');
}

const op = (fields: Record<string, unknown>) => ({ operators: { ops: { targets: 'any', ...fields } } });

describe('connector config', () => {
  it('defaults: no operators, no addresses (the config file may leave it out)', () => {
    const { config } = load({});
    expect(config.connector).toEqual({ tmux: {}, kitty: {}, operators: {} });
    expect(operatorGrants(config.connector)).toEqual([]);
  });

  it('an operator with targets only: tmux, read, the read tools, the default run limits', () => {
    const { config } = load({ connector: { operators: { watcher: { targets: { prefixes: ['loop-'] } } } } });
    expect(operatorGrants(config.connector)).toEqual([
      {
        operator: 'watcher',
        backends: ['tmux'],
        scope: 'read',
        targets: { kind: 'prefix', prefixes: ['loop-'] },
        tools: ['list_terminals', 'read_terminal'],
        run: { timeoutSeconds: 60, maxOutputLines: 2000, inPane: false },
      },
    ]);
  });

  it('reads every target form and the addresses', () => {
    const connector = connectorSchema.parse({
      tmux: { socket: 'ops-sock' },
      kitty: { to: 'unix:/tmp/kitty-1' },
      operators: {
        a: { targets: 'any', scope: 'destroy', backends: ['tmux', 'kitty'] },
        b: { targets: { single: 'work-shell' }, scope: 'write', tools: ['run_command', 'run_command'] },
        c: { targets: { session: 'github:Octo/Widgets#12' } },
        d: { targets: { prefixes: ['loop-', 'loop-'] }, run: { timeoutSeconds: 5, inPane: true } },
      },
    });
    expect(connector.tmux.socket).toBe('ops-sock');
    expect(connector.kitty.to).toBe('unix:/tmp/kitty-1');
    const [a, b, c, d] = operatorGrants(connector);
    expect(a).toMatchObject({ targets: { kind: 'any' }, tools: expect.arrayContaining(['close_terminal']) });
    expect(a?.tools).toHaveLength(5);
    expect(b).toMatchObject({ targets: { kind: 'single', name: 'work-shell' }, tools: ['run_command'] });
    // The work item is held canonical, as the registry holds it.
    expect(c?.targets).toEqual({ kind: 'session', workItem: 'github:octo/widgets#12' });
    expect(d).toMatchObject({
      targets: { kind: 'prefix', prefixes: ['loop-'] },
      run: { timeoutSeconds: 5, maxOutputLines: 2000, inPane: true },
    });
    expect(grantOf('x', connectorSchema.parse(op({})).operators.ops as never).operator).toBe('x');
  });

  it('refuses a tool above the scope, saying which', () => {
    expect(problems(op({ scope: 'read', tools: ['read_terminal', 'send_input'] }))).toMatch(
      /operators\.ops\.tools: send_input needs a scope above read/,
    );
    expect(problems(op({ scope: 'write', tools: ['close_terminal', 'run_command'] }))).toMatch(
      /close_terminal needs a scope above write/,
    );
  });

  it('refuses missing targets, empty prefixes and names, bad work items', () => {
    expect(problems({ operators: { ops: {} } })).toMatch(/operators\.ops\.targets/);
    expect(problems(op({ targets: { prefixes: [''] } }))).toMatch(/empty prefix would match every name/);
    expect(problems(op({ targets: { prefixes: [] } }))).toMatch(/targets/);
    expect(problems(op({ targets: { single: '' } }))).toMatch(/targets/);
    expect(problems(op({ targets: { session: 'octo/widgets#12' } }))).toMatch(/targets/);
    expect(problems(op({ targets: { session: 'github:octo/../x#1' } }))).toMatch(/targets/);
    expect(problems(op({ targets: 'all' }))).toMatch(/targets/);
    expect(problems(op({ targets: { single: 'a', prefixes: ['b'] } }))).toMatch(/targets/);
    expect(problems(op({ targets: { prefixes: ['loop-\u001b[31m'] } }))).toMatch(/targets/);
    expect(problems(op({ targets: { single: 'loop-\u202ea' } }))).toMatch(/targets/);
  });

  it('refuses unknown keys at every level', () => {
    expect(problems({ operators: {}, extra: 1 })).toMatch(/extra/);
    expect(problems(op({ sudo: true }))).toMatch(/sudo/);
    expect(problems(op({ run: { timeoutSeconds: 5, shell: 'bash' } }))).toMatch(/shell/);
    expect(problems({ tmux: { socket: 'a', server: 'b' } })).toMatch(/server/);
    expect(problems({ kitty: { to: 'unix:/x', password: 'p' } })).toMatch(/password/);
  });

  it('refuses wrong types, bad names and values out of range', () => {
    expect(problems(op({ backends: ['screen'] }))).toMatch(/backends/);
    expect(problems(op({ backends: [] }))).toMatch(/backends/);
    expect(problems(op({ backends: 'tmux' }))).toMatch(/backends/);
    expect(problems(op({ scope: 'root' }))).toMatch(/scope/);
    expect(problems(op({ tools: ['exec_shell'] }))).toMatch(/tools/);
    expect(problems(op({ tools: [] }))).toMatch(/tools/);
    expect(problems(op({ tools: 'list_terminals' }))).toMatch(/tools/);
    expect(problems(op({ run: { timeoutSeconds: 3601 } }))).toMatch(/timeoutSeconds/);
    expect(problems(op({ run: { timeoutSeconds: 0 } }))).toMatch(/timeoutSeconds/);
    expect(problems(op({ run: { maxOutputLines: 10_001 } }))).toMatch(/maxOutputLines/);
    expect(problems(op({ run: { maxOutputLines: 1.5 } }))).toMatch(/maxOutputLines/);
    expect(problems(op({ run: { inPane: 'yes' } }))).toMatch(/inPane/);
    for (const name of ['Ops', '1ops', 'ops_x', '', 'a'.repeat(41), 'ops\n'])
      expect(problems({ operators: { [name]: { targets: 'any' } } }), name).not.toBe('');
    expect(problems({ operators: { 'ops-2': { targets: 'any' } } })).toBe('');
    // zod drops a `__proto__` key (it would replace the result's prototype): it declares nothing.
    const proto = JSON.parse('{"operators":{"__proto__":{"targets":"any","scope":"destroy"}}}');
    expect(connectorSchema.parse(proto).operators).toEqual({});
    expect(problems({ tmux: { socket: '../x' } })).toMatch(/socket/);
    expect(problems({ tmux: { socket: 'a b' } })).toMatch(/socket/);
    expect(problems({ kitty: { to: '/tmp/kitty' } })).toMatch(/kitty\.to/);
    expect(problems({ kitty: { to: 'unix:/tmp/a b' } })).toMatch(/kitty\.to/);
    expect(problems({ kitty: { to: 'tcp:localhost:7777' } })).toBe('');
    expect(problems({ operators: [] })).toMatch(/operators/);
    expect(problems('any')).not.toBe('');
  });

  it('refuses oversized config: too many operators, prefixes, long names', () => {
    const many = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`op-${i}`, { targets: 'any' }]));
    expect(problems({ operators: many })).toMatch(/at most 100 operators/);
    expect(problems(op({ targets: { prefixes: Array.from({ length: 51 }, (_, i) => `p${i}`) } }))).toMatch(
      /targets/,
    );
    expect(problems(op({ targets: { single: 'x'.repeat(201) } }))).toMatch(/targets/);
    expect(problems(op({ targets: { session: `github:o/r#${'1'.repeat(100_000)}` } }))).toMatch(/targets/);
  });

  it('a bad connector section fails the load, naming the key', () => {
    expect(() =>
      load({
        connector: { operators: { ops: { targets: 'any', scope: 'read', tools: ['close_terminal'] } } },
      }),
    ).toThrow(/connector\.operators\.ops\.tools/);
  });

  it('is in the JSON Schema export, strict, with its defaults', () => {
    const schema = configJsonSchema() as {
      properties: Record<string, { additionalProperties?: unknown; properties?: Record<string, unknown> }>;
    };
    const connector = schema.properties.connector;
    expect(connector?.additionalProperties).toBe(false);
    expect(Object.keys(connector?.properties ?? {})).toEqual(['tmux', 'kitty', 'operators']);
    expect(JSON.stringify(connector)).toMatch(/"default":\["tmux"\]/);
    expect(JSON.parse(JSON.stringify(schema))).toEqual(schema);
  });
});
