import { describe, expect, it } from 'vitest';
import { presetSchema } from '../../src/engines/preset.js';
import { BUILTIN_PRESETS } from '../../src/engines/presets.js';
import {
  type EngineFacts,
  type PlannedTurn,
  type PlanTurnInput,
  planTurn,
} from '../../src/sessions/plan-turn.js';
import { engineFacts } from '../../src/sessions/turn-start.js';

/** Claude Code's facts: stream-json headless, a TUI with settings hooks and a transcript. */
const claude: EngineFacts = {
  protocolMeter: 'stream-json',
  transcript: true,
  settingsHooks: true,
  policyHookArgs: ['--settings', '{settingsFile}'],
  otel: false,
};
/** An engine with a plain TUI: no hooks, no transcript, no policy hook of its own. */
const plain: EngineFacts = {
  protocolMeter: 'none',
  transcript: false,
  settingsHooks: false,
  policyHookArgs: undefined,
  otel: false,
};
const hook = { command: 'node hook.js', matcher: 'Bash', settingsFile: '/d/policy-settings.json' };
const guard = { args: ['--sandboxed'], interactiveArgs: ['--tui-sandboxed'], wire: false, notes: [] };
const processRunner = { name: 'process', mode: 'headless' } as const;
const tmuxRunner = { name: 'tmux', mode: 'interactive' } as const;

const base: PlanTurnInput = {
  engine: claude,
  runner: processRunner,
  guard: undefined,
  policyHook: undefined,
  telemetry: false,
};
const planned = (fields: Partial<PlannedTurn>): PlannedTurn => ({
  args: [],
  interactiveArgs: [],
  preToolHook: undefined,
  telemetry: false,
  meter: 'stream-json',
  releaseAtEnd: true,
  warnings: [],
  ...fields,
});
const OTEL_ON_TUI = {
  message: 'otel.enabled is not used on this runner: the session is metered from its transcript',
  fields: { runner: 'tmux' },
};
const NO_TUI_HOOK = {
  message:
    'this TUI has no Claude settings hooks to carry the policy hook: its acts are judged after the turn',
  fields: { runner: 'tmux' },
};

const cases: Array<[string, Partial<PlanTurnInput>, PlannedTurn]> = [
  ['headless, nothing else: the protocol meters it', {}, planned({})],
  [
    'headless with a policy hook: its settings file in the argv',
    { policyHook: hook },
    planned({ args: ['--settings', '/d/policy-settings.json'] }),
  ],
  [
    "headless under the guard: the guard's arguments first, then the hook's",
    { guard, policyHook: hook },
    planned({
      args: ['--sandboxed', '--settings', '/d/policy-settings.json'],
      interactiveArgs: ['--tui-sandboxed'],
    }),
  ],
  [
    'headless with an OpenTelemetry exporter offered: metered otel',
    { engine: { ...claude, otel: true }, telemetry: true },
    planned({ telemetry: true, meter: 'otel' }),
  ],
  [
    'headless, otel enabled but nothing receives: the protocol meters it, nothing said',
    { engine: { ...claude, otel: true }, telemetry: false },
    planned({}),
  ],
  [
    'headless at the wire: the wire is the only meter (no OpenTelemetry besides)',
    { guard: { ...guard, wire: true }, telemetry: true },
    planned({ args: ['--sandboxed'], interactiveArgs: ['--tui-sandboxed'], meter: 'wire' }),
  ],
  ['headless on a protocol without usage: meter none', { engine: plain }, planned({ meter: 'none' })],
  [
    'headless engine with no argument for the hook: said, judged after the turn',
    { engine: plain, policyHook: hook },
    planned({
      meter: 'none',
      warnings: [
        {
          message: 'this engine has no argument to carry the policy hook: its acts are judged after the turn',
          fields: { runner: 'process' },
        },
      ],
    }),
  ],
  [
    "the guard's notes are said first",
    { guard: { ...guard, notes: ['no sandbox'] }, engine: { ...claude, otel: true }, runner: tmuxRunner },
    planned({
      args: ['--sandboxed'],
      interactiveArgs: ['--tui-sandboxed'],
      meter: 'transcript',
      releaseAtEnd: false,
      warnings: [{ message: 'no sandbox' }, OTEL_ON_TUI],
    }),
  ],
  [
    'a TUI with settings hooks: the runner registers the hook; its transcript meters it; its token is kept',
    { runner: tmuxRunner, policyHook: hook },
    planned({
      preToolHook: { command: 'node hook.js', matcher: 'Bash' },
      meter: 'transcript',
      releaseAtEnd: false,
    }),
  ],
  [
    'a TUI never gets OpenTelemetry (its environment outlives the receiver): said when enabled',
    { runner: tmuxRunner, engine: { ...claude, otel: true }, telemetry: true },
    planned({ meter: 'transcript', releaseAtEnd: false, warnings: [OTEL_ON_TUI] }),
  ],
  [
    'a TUI without hooks or transcript: unmetered, and the policy hook cannot apply (said)',
    { runner: tmuxRunner, engine: plain, policyHook: hook },
    planned({ meter: 'none', releaseAtEnd: false, warnings: [NO_TUI_HOOK] }),
  ],
  [
    'a TUI at the wire: metered wire',
    { runner: tmuxRunner, guard: { ...guard, wire: true } },
    planned({
      args: ['--sandboxed'],
      interactiveArgs: ['--tui-sandboxed'],
      meter: 'wire',
      releaseAtEnd: false,
    }),
  ],
];

describe('planTurn: how a turn is run and measured, from plain data', () => {
  it.each(cases)('%s', (_name, fields, expected) => {
    expect(planTurn({ ...base, ...fields })).toEqual(expected);
  });

  it('fills {settingsFile} wherever it stands in an argument, and changes nothing it is given', () => {
    const input: PlanTurnInput = Object.freeze({
      ...base,
      engine: Object.freeze({ ...claude, policyHookArgs: Object.freeze(['--settings={settingsFile}']) }),
      guard: Object.freeze({ ...guard, args: Object.freeze(['-x']) }),
      policyHook: hook,
    });
    const before = JSON.stringify(input);
    expect(planTurn(input).args).toEqual(['-x', '--settings=/d/policy-settings.json']);
    expect(JSON.stringify(input)).toBe(before);
  });

  it("reads an engine's facts from its preset's fields, not its name", () => {
    const facts = (name: string) => engineFacts(presetSchema.parse(BUILTIN_PRESETS[name]));
    expect(facts('claude')).toEqual({
      protocolMeter: 'stream-json',
      transcript: true,
      settingsHooks: true,
      policyHookArgs: ['--settings', '{settingsFile}'],
      otel: false,
    });
    const renamed = presetSchema.parse({ ...BUILTIN_PRESETS.claude, binary: '/opt/other' });
    expect(engineFacts(renamed)).toEqual(facts('claude'));
    expect(facts('codex')).toMatchObject({ settingsHooks: false, policyHookArgs: undefined });
  });
});
