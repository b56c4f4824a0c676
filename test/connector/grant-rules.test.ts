import { describe, expect, it } from 'vitest';
import type { Binding, Grant, GrantRequest, TargetRule } from '../../src/connector/grant.js';
import {
  gateCall,
  narrowGrant,
  type TargetTerminal,
  targetOutside,
  terminalInGrant,
  tierOf,
  toolsAbove,
  toolsWithin,
} from '../../src/connector/grant-rules.js';
import { TOOL_NAMES, type ToolName } from '../../src/connector/names.js';

const ALL: ToolName[] = [...TOOL_NAMES];

function grant(overrides: Partial<Grant> = {}): Grant {
  return {
    operator: 'ops',
    backends: ['tmux', 'kitty'],
    scope: 'destroy',
    targets: { kind: 'any' },
    tools: ALL,
    run: { timeoutSeconds: 60, maxOutputLines: 2000, inPane: true },
    ...overrides,
  };
}

const term = (name: string, identity = '$1@100', backend = 'tmux'): TargetTerminal => ({
  backend,
  name,
  identity,
});
const bound: Binding = { backend: 'tmux', name: 'loop-a', identity: '$1@100' };

const refused = (ceiling: Grant, request: GrantRequest): string[] => {
  const result = narrowGrant(ceiling, request);
  if (result.ok) throw new Error(`expected a refusal, got ${JSON.stringify(result.grant)}`);
  return result.errors;
};
const narrowed = (ceiling: Grant, request: GrantRequest): Grant => {
  const result = narrowGrant(ceiling, request);
  if (!result.ok) throw new Error(`expected a grant, got ${result.errors.join('; ')}`);
  return result.grant;
};

describe('tiers', () => {
  it('knows the tier of each tool and none for anything else (prototype names included)', () => {
    expect(TOOL_NAMES.map(tierOf)).toEqual(['read', 'read', 'write', 'write', 'destroy']);
    for (const name of ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'evil', ''])
      expect(tierOf(name)).toBeUndefined();
  });

  it('lists the tools within a scope and those above it', () => {
    expect(toolsWithin('read')).toEqual(['list_terminals', 'read_terminal']);
    expect(toolsWithin('write')).toEqual(['list_terminals', 'read_terminal', 'send_input', 'run_command']);
    expect(toolsWithin('destroy')).toEqual(ALL);
    expect(toolsAbove(['read_terminal', 'send_input', 'close_terminal', 'nope'], 'read')).toEqual([
      'send_input',
      'close_terminal',
      'nope',
    ]);
  });
});

describe('narrowGrant', () => {
  it('an empty request is the ceiling itself', () => {
    expect(narrowed(grant(), {})).toEqual(grant());
  });

  it('narrows every dimension asked for within the ceiling', () => {
    const g = narrowed(grant(), {
      backends: ['tmux'],
      scope: 'write',
      targets: { kind: 'prefix', prefixes: ['loop-'] },
      tools: ['read_terminal', 'send_input'],
      run: { timeoutSeconds: 10, maxOutputLines: 50, inPane: false },
    });
    expect(g).toEqual({
      operator: 'ops',
      backends: ['tmux'],
      scope: 'write',
      targets: { kind: 'prefix', prefixes: ['loop-'] },
      tools: ['read_terminal', 'send_input'],
      run: { timeoutSeconds: 10, maxOutputLines: 50, inPane: false },
    });
  });

  it('a narrower scope without tools keeps the granted tools that scope still reaches', () => {
    expect(narrowed(grant(), { scope: 'read' }).tools).toEqual(['list_terminals', 'read_terminal']);
    const few = grant({ tools: ['read_terminal', 'run_command', 'close_terminal'] });
    expect(narrowed(few, { scope: 'write' }).tools).toEqual(['read_terminal', 'run_command']);
  });

  it('refuses, never clips, any dimension asked wider — with every reason', () => {
    const ceiling = grant({
      backends: ['tmux'],
      scope: 'write',
      targets: { kind: 'prefix', prefixes: ['loop-'] },
      tools: ['list_terminals', 'read_terminal', 'send_input'],
      run: { timeoutSeconds: 60, maxOutputLines: 100, inPane: false },
    });
    const errors = refused(ceiling, {
      backends: ['tmux', 'kitty'],
      scope: 'destroy',
      targets: { kind: 'any' },
      tools: ['read_terminal', 'run_command'],
      run: { timeoutSeconds: 61, maxOutputLines: 101, inPane: true },
    });
    expect(errors).toHaveLength(7);
    expect(errors.join('\n')).toMatch(/backends: "kitty" not granted/);
    expect(errors.join('\n')).toMatch(/scope: destroy is above the granted write/);
    expect(errors.join('\n')).toMatch(/targets: any terminal asked for/);
    expect(errors.join('\n')).toMatch(/tools: "run_command" not granted/);
    expect(errors.join('\n')).toMatch(/run.timeoutSeconds: 61 is above the granted 60/);
    expect(errors.join('\n')).toMatch(/run.maxOutputLines: 101 is above the granted 100/);
    expect(errors.join('\n')).toMatch(/run.inPane/);
  });

  it('refuses one wider dimension alone', () => {
    expect(refused(grant({ scope: 'read', tools: toolsWithin('read') }), { scope: 'write' })).toHaveLength(1);
    expect(refused(grant({ backends: ['tmux'] }), { backends: ['kitty'] })).toHaveLength(1);
    expect(
      refused(grant({ run: { ...grant().run, inPane: false } }), { run: { inPane: true } }),
    ).toHaveLength(1);
  });

  it('refuses tools above the asked scope, unknown tools, empty lists and bad numbers', () => {
    expect(refused(grant(), { scope: 'read', tools: ['send_input'] })).toEqual([
      'tools: "send_input" need a scope above read',
    ]);
    expect(refused(grant(), { tools: ['nope' as ToolName] })[0]).toMatch(/"nope" not granted/);
    expect(refused(grant(), { tools: [] })[0]).toMatch(/none asked for/);
    expect(refused(grant(), { backends: [] })[0]).toMatch(/none asked for/);
    expect(refused(grant(), { scope: 'root' as never })[0]).toMatch(/not a scope/);
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY])
      expect(refused(grant(), { run: { timeoutSeconds: bad } })[0]).toMatch(/not a positive number/);
  });

  it('deduplicates what it is asked for', () => {
    const g = narrowed(grant(), { backends: ['tmux', 'tmux'], tools: ['read_terminal', 'read_terminal'] });
    expect(g.backends).toEqual(['tmux']);
    expect(g.tools).toEqual(['read_terminal']);
  });
});

describe('targetOutside (a requested target within the granted ones)', () => {
  const any: TargetRule = { kind: 'any' };
  const loop: TargetRule = { kind: 'prefix', prefixes: ['loop-', 'work-'] };
  const single = (name: string): TargetRule => ({ kind: 'single', name });
  const session = (workItem: string): TargetRule => ({ kind: 'session', workItem });
  const prefix = (...prefixes: string[]): TargetRule => ({ kind: 'prefix', prefixes });

  it('any admits every well-formed target', () => {
    for (const t of [any, loop, single('x'), session('github:o/r#1')])
      expect(targetOutside(any, t)).toBeNull();
  });

  it('prefixes admit narrower prefixes and names under them, not wider ones', () => {
    expect(targetOutside(loop, prefix('loop-'))).toBeNull();
    expect(targetOutside(loop, prefix('loop-abc', 'work-x'))).toBeNull();
    expect(targetOutside(loop, single('loop-a'))).toBeNull();
    expect(targetOutside(loop, prefix('loop'))).toMatch(/"loop" not within/);
    expect(targetOutside(loop, prefix('loop-a', 'x'))).toMatch(/"x" not within/);
    expect(targetOutside(loop, single('other'))).toMatch(/does not start with a granted prefix/);
    expect(targetOutside(loop, any)).toMatch(/any terminal asked for/);
  });

  it('a unicode look-alike is another character', () => {
    expect(targetOutside(loop, single('loop\u2010a'))).toMatch(/does not start/);
    expect(targetOutside(loop, prefix('loop\u2011'))).toMatch(/not within/);
  });

  it('a daemon session is within prefixes only when every loop- name is', () => {
    expect(targetOutside(loop, session('github:o/r#1'))).toBeNull();
    expect(targetOutside(prefix('l'), session('github:o/r#1'))).toBeNull();
    expect(targetOutside(prefix('loop-github-o'), session('github:o/r#1'))).toMatch(/daemon session/);
    expect(targetOutside(prefix('work-'), session('github:o/r#1'))).toMatch(/daemon session/);
  });

  it('a single admits only itself (exactly); a session only the same work item', () => {
    expect(targetOutside(single('loop-a'), single('loop-a'))).toBeNull();
    expect(targetOutside(single('loop-a'), single('loop-a-b'))).toMatch(/only the terminal "loop-a"/);
    expect(targetOutside(single('loop-a'), prefix('loop-a'))).toMatch(/only the terminal/);
    expect(targetOutside(single('loop-a'), any)).toMatch(/only the terminal/);
    expect(targetOutside(session('github:Octo/R#1'), session('github:octo/r#1'))).toBeNull();
    expect(targetOutside(session('github:o/r#1'), session('github:o/r#2'))).toMatch(/only the session/);
    expect(targetOutside(session('github:o/r#1'), single('loop-x'))).toMatch(/only the session/);
  });

  it('refuses malformed targets under any ceiling', () => {
    expect(targetOutside(any, prefix())).toMatch(/no prefix/);
    expect(targetOutside(any, prefix(''))).toMatch(/empty prefix/);
    expect(targetOutside(loop, prefix('loop-', ''))).toMatch(/empty prefix/);
    expect(targetOutside(any, single(''))).toMatch(/empty terminal name/);
    expect(targetOutside(any, session('octo/r#1'))).toMatch(/not a work item/);
    expect(targetOutside(any, { kind: 'weird' } as never)).toMatch(/unknown kind/);
  });
});

describe('gateCall', () => {
  it('denies a tool with no tier, above the scope, or not granted', () => {
    expect(gateCall({ grant: grant(), binding: null, tool: 'exec_shell' })).toMatchObject({
      ok: false,
      code: 'E_SCOPE',
      message: expect.stringMatching(/no tier/),
    });
    expect(gateCall({ grant: grant(), binding: null, tool: 'toString' })).toMatchObject({ code: 'E_SCOPE' });
    const reader = grant({ scope: 'read', tools: ALL });
    expect(gateCall({ grant: reader, binding: null, tool: 'send_input' })).toMatchObject({
      code: 'E_SCOPE',
      message: expect.stringMatching(/needs scope write/),
    });
    const few = grant({ tools: ['list_terminals'] });
    expect(gateCall({ grant: few, binding: null, tool: 'read_terminal' })).toMatchObject({
      code: 'E_SCOPE',
      message: expect.stringMatching(/not among/),
    });
    expect(gateCall({ grant: few, binding: null, tool: 'list_terminals' })).toEqual({ ok: true });
  });

  it('denies a backend not granted', () => {
    const tmuxOnly = grant({ backends: ['tmux'] });
    expect(
      gateCall({ grant: tmuxOnly, binding: null, tool: 'read_terminal', terminal: term('x', 'k', 'kitty') }),
    ).toMatchObject({ code: 'E_SCOPE', message: expect.stringMatching(/"kitty" backend/) });
  });

  it('prefixes match exactly at the start (loop-a reaches loop-a-b), look-alikes do not', () => {
    const g = grant({ targets: { kind: 'prefix', prefixes: ['loop-a'] } });
    const call = (name: string) =>
      gateCall({ grant: g, binding: null, tool: 'send_input', terminal: term(name) });
    expect(call('loop-a')).toEqual({ ok: true });
    expect(call('loop-a-b')).toEqual({ ok: true });
    expect(call('loop-b')).toMatchObject({ code: 'E_TARGET_NOT_BOUND' });
    expect(call('loop\u2010a')).toMatchObject({ code: 'E_TARGET_NOT_BOUND' });
    expect(call('xloop-a')).toMatchObject({ code: 'E_TARGET_NOT_BOUND' });
    expect(call('LOOP-A')).toMatchObject({ code: 'E_TARGET_NOT_BOUND' });
  });

  it('a bound grant reaches its terminal only: not loop-a-b, not re-created, not renamed', () => {
    for (const targets of [
      { kind: 'single', name: 'loop-a' },
      { kind: 'session', workItem: 'github:o/r#1' },
    ] as TargetRule[]) {
      const g = grant({ targets });
      const call = (t: TargetTerminal, binding: Binding | null = bound) =>
        gateCall({ grant: g, binding, tool: 'run_command', terminal: t });
      expect(call(term('loop-a'))).toEqual({ ok: true });
      expect(call(term('loop-a-b', '$2@100'))).toMatchObject({ code: 'E_TARGET_NOT_BOUND' });
      expect(call(term('loop-a', '$9@200'))).toMatchObject({
        code: 'E_TARGET_NOT_BOUND',
        message: expect.stringMatching(/re-created/),
      });
      expect(call(term('loop-z', '$1@100'))).toMatchObject({
        code: 'E_TARGET_NOT_BOUND',
        message: expect.stringMatching(/renamed/),
      });
      expect(call(term('loop-a', '$1@100', 'kitty'))).toMatchObject({ code: 'E_TARGET_NOT_BOUND' });
      expect(call(term('loop-a'), null)).toMatchObject({
        code: 'E_TARGET_NOT_BOUND',
        message: expect.stringMatching(/no terminal is bound/),
      });
    }
  });

  it("never closes the daemon's own sessions, but may read them", () => {
    const protectedNames = new Set(['loop-a']);
    const g = grant();
    expect(
      gateCall({ grant: g, binding: null, tool: 'close_terminal', terminal: term('loop-a'), protectedNames }),
    ).toMatchObject({ code: 'E_SCOPE', message: expect.stringMatching(/daemon's own/) });
    expect(
      gateCall({
        grant: g,
        binding: null,
        tool: 'close_terminal',
        terminal: term('loop-a-b'),
        protectedNames,
      }),
    ).toEqual({ ok: true });
    expect(
      gateCall({ grant: g, binding: null, tool: 'read_terminal', terminal: term('loop-a'), protectedNames }),
    ).toEqual({ ok: true });
  });

  it('checks the targets before the protection (an unbound terminal is reported as unbound)', () => {
    const g = grant({ targets: { kind: 'prefix', prefixes: ['work-'] } });
    expect(
      gateCall({
        grant: g,
        binding: null,
        tool: 'close_terminal',
        terminal: term('loop-a'),
        protectedNames: new Set(['loop-a']),
      }),
    ).toMatchObject({ code: 'E_TARGET_NOT_BOUND' });
  });

  it('messages are safe to show: controls gone, quoted, bounded', () => {
    const hostile = `\u001b]0;pwned\u0007evil\u001b[31m\n${'x'.repeat(5000)}`;
    const g = grant({ targets: { kind: 'prefix', prefixes: ['loop-'] } });
    const result = gateCall({ grant: g, binding: null, tool: 'read_terminal', terminal: term(hostile) });
    expect(result.ok).toBe(false);
    const message = result.ok ? '' : result.message;
    expect(message).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
    expect(message).not.toContain('pwned');
    expect(message.length).toBeLessThan(300);
    const tool = gateCall({ grant: g, binding: null, tool: `\u001b[2J${'y'.repeat(1000)}` });
    expect(tool.ok ? '' : tool.message).not.toContain('\u001b');
    expect((tool.ok ? '' : tool.message).length).toBeLessThan(200);
  });
});

describe('terminalInGrant', () => {
  it('filters lists by backend and targets', () => {
    const g = grant({ backends: ['tmux'], targets: { kind: 'prefix', prefixes: ['loop-'] } });
    expect(terminalInGrant(g, null, term('loop-a'))).toBe(true);
    expect(terminalInGrant(g, null, term('other'))).toBe(false);
    expect(terminalInGrant(g, null, term('loop-a', 'k', 'kitty'))).toBe(false);
    const single = grant({ targets: { kind: 'single', name: 'loop-a' } });
    expect(terminalInGrant(single, bound, term('loop-a'))).toBe(true);
    expect(terminalInGrant(single, bound, term('loop-a', '$7@1'))).toBe(false);
    expect(terminalInGrant(single, null, term('loop-a'))).toBe(false);
  });
});
