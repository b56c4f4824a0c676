import type { RunnerMode } from '../core/ports/runners.js';
import type { Meter } from '../core/ports/sessions.js';

/**
 * How one turn is planned for its engine and its runner: what is added to the engine's argv, which
 * meter measures it, where the policy hook goes, whether the OpenTelemetry exporter is pointed at
 * the daemon, and what is said at its start. Pure: plain data in, plain data out; the turn service
 * does the I/O around it. Nothing here branches on an engine's or a runner's name: engines differ
 * by their preset's fields, runners by the mode they declare.
 */

/** What planning a turn needs to know of its engine (read from its preset's fields). */
export interface EngineFacts {
  /** The meter its headless protocol provides (`none`: it reports no usage). */
  protocolMeter: Meter;
  /** Its TUI writes a transcript the runner reads the turn's usage from. */
  transcript: boolean;
  /** Its TUI reports its turns through settings hooks, beside which the policy hook is registered. */
  settingsHooks: boolean;
  /** Argv that gives a headless turn the policy hook's settings file (`{settingsFile}`); undefined: none. */
  policyHookArgs: readonly string[] | undefined;
  /** It opts in to OpenTelemetry metering (`otel.enabled`). */
  otel: boolean;
}

/** The policy hook written for this turn's session (its settings file and the command it registers). */
export interface PolicyHook {
  command: string;
  matcher: string;
  settingsFile: string;
}

export interface PlanTurnInput {
  engine: EngineFacts;
  /** The session's runner: its name (said in warnings) and the mode it declares. */
  runner: { name: string; mode: RunnerMode };
  /** What the guard prepared (sandbox and gateway arguments, the wire meter, notes); undefined: no guard. */
  guard:
    | { args: readonly string[]; interactiveArgs: readonly string[]; wire: boolean; notes: readonly string[] }
    | undefined;
  /** The merge policy's pre-tool hook, when the engine has one; undefined: none. */
  policyHook: PolicyHook | undefined;
  /** An OpenTelemetry exporter environment is offered for the engine (it opts in; a receiver listens). */
  telemetry: boolean;
}

export interface TurnWarning {
  message: string;
  fields?: Record<string, string> | undefined;
}

export interface PlannedTurn {
  /** Added to the headless argv: the guard's arguments, then the policy hook's. */
  args: string[];
  /** Added to the TUI's argv. */
  interactiveArgs: string[];
  /** The policy hook the runner registers in the TUI's own hook settings; undefined: none. */
  preToolHook: { command: string; matcher: string } | undefined;
  /** The turn's environment gets the OpenTelemetry exporter's (its meter is then `otel`). */
  telemetry: boolean;
  meter: Meter;
  /** The guard's hold on the turn (its capability token) is released when the turn ends. */
  releaseAtEnd: boolean;
  /** Said at the start of the turn (never silent, invariant 7). */
  warnings: TurnWarning[];
}

const fillSettingsFile = (args: readonly string[], file: string) =>
  args.map((a) => a.split('{settingsFile}').join(file));

/** How a turn of this engine on this runner is run and measured. */
export function planTurn(input: PlanTurnInput): PlannedTurn {
  const { engine, runner, guard, policyHook } = input;
  const headless = runner.mode === 'headless';
  // A headless turn carries the hook in its argv; a TUI registers it only beside its own settings
  // hooks (elsewhere its acts are judged after the turn).
  const hookArgs =
    headless && policyHook && engine.policyHookArgs
      ? fillSettingsFile(engine.policyHookArgs, policyHook.settingsFile)
      : undefined;
  const tuiHook = !headless && policyHook && engine.settingsHooks ? policyHook : undefined;
  // OpenTelemetry meters headless turns only: a TUI gets its environment once, when it starts, so
  // its exporter may point at a receiver long gone (its transcript meters it). The gateway's wire
  // meter, when it serves the engine, is the only one (nothing counted twice).
  const telemetry = headless && !guard?.wire && input.telemetry;
  const warnings: TurnWarning[] = (guard?.notes ?? []).map((message) => ({ message }));
  if (engine.otel && !headless) {
    warnings.push({
      message: 'otel.enabled is not used on this runner: the session is metered from its transcript',
      fields: { runner: runner.name },
    });
  }
  if (policyHook && !hookArgs && !tuiHook) {
    warnings.push({
      message: headless
        ? 'this engine has no argument to carry the policy hook: its acts are judged after the turn'
        : 'this TUI has no Claude settings hooks to carry the policy hook: its acts are judged after the turn',
      fields: { runner: runner.name },
    });
  }
  return {
    args: [...(guard?.args ?? []), ...(hookArgs ?? [])],
    interactiveArgs: [...(guard?.interactiveArgs ?? [])],
    preToolHook: tuiHook && { command: tuiHook.command, matcher: tuiHook.matcher },
    telemetry,
    meter: guard?.wire
      ? 'wire'
      : telemetry
        ? 'otel'
        : headless
          ? engine.protocolMeter
          : engine.transcript
            ? 'transcript'
            : 'none',
    releaseAtEnd: headless,
    warnings,
  };
}
