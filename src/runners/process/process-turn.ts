import type { EndReason } from '../../core/ports/sessions.js';
import { PROTOCOL_REGISTRY } from '../../engines/protocols/index.js';
import { summarize } from '../../engines/protocols/protocol.js';
import type { RunOutcome, RunTurnInput } from '../runner.js';
import type { EngineProcess, ExitStatus } from './engine-process.js';
import { raceTimeout, terminateProcessGroup } from './terminate.js';
import type { TurnOutput } from './turn-output.js';

/** What ended the race of a turn's process. */
type First = 'result' | 'exit' | 'spawn-error' | 'backstop' | 'cancel';

/** A turn that never started a process. */
export function notRun(endReason: EndReason, error: string): RunOutcome {
  return {
    ok: false,
    endReason,
    endedAt: new Date(),
    exitCode: null,
    exitSignal: null,
    error,
    stoppedBy: 'never-started',
  };
}

/**
 * A started engine process, to its end: the race decides how the turn ends, then the process group
 * is stopped, its last output read, and the turn judged.
 */
export async function runProcess(
  input: RunTurnInput,
  child: EngineProcess,
  output: TurnOutput,
  keys: { close(): Promise<void> } | undefined,
): Promise<RunOutcome> {
  const first = await race(input, child, output.resultSeen);
  await settleFirst(input, child, output, first);
  // The turn's end is decided: no more keys.
  await keys?.close();
  const stoppedBy = await stop(input, child, first);
  const exit = child.pid === undefined ? { code: null, signal: null } : await child.exited;
  // 'exit' can come before the last output is read (under load, it often does): take what is
  // left and wait for the output to close — bounded, as a grandchild may hold pipes open —
  // before judging the turn.
  child.finishOutput();
  if (child.pid !== undefined) await raceTimeout(child.outputClosed, input.killGraceMs);
  if (!output.ended) settleExit(input, output, exit);
  const end = output.ended as NonNullable<TurnOutput['ended']>;
  return {
    ok: end.ok,
    endReason: end.reason,
    endedAt: end.at,
    exitCode: exit.code,
    exitSignal: exit.signal,
    error: end.error,
    stoppedBy,
  };
}

/**
 * The race, first writer wins: the engine's result event, the process exiting, a spawn error, the
 * backstop timer, the caller's AbortSignal.
 */
async function race(input: RunTurnInput, child: EngineProcess, resultSeen: Promise<void>): Promise<First> {
  // The backstop is unref'd: it must never be what keeps a process alive (the child is, while it
  // runs); it is cleared whatever wins.
  let backstopTimer: NodeJS.Timeout | undefined;
  const backstop = new Promise<void>((resolve) => {
    backstopTimer = setTimeout(resolve, input.backstopMs);
    backstopTimer.unref();
  });
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<void>((resolve) => {
    onAbort = () => resolve();
    // Aborted while the turn was being set up (node-pty loading, the keys socket): no event comes.
    if (input.signal?.aborted) resolve();
    else input.signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([
      resultSeen.then(() => 'result' as const),
      child.exited.then(() => 'exit' as const),
      child.spawnError.then(() => 'spawn-error' as const),
      backstop.then(() => 'backstop' as const),
      aborted.then(() => 'cancel' as const),
    ]);
  } finally {
    clearTimeout(backstopTimer);
    if (onAbort) input.signal?.removeEventListener('abort', onAbort);
  }
}

/** The end the race decided, unless the result event already settled it. */
async function settleFirst(
  input: RunTurnInput,
  child: EngineProcess,
  output: TurnOutput,
  first: First,
): Promise<void> {
  const { preset } = input;
  if (first === 'backstop') {
    output.settle(
      'backstop',
      false,
      `no end of turn after ${Math.round(input.backstopMs / 1000)} s; stopped by the backstop timer`,
    );
  } else if (first === 'cancel') {
    output.settle('cancel', false, 'cancelled');
  } else if (first === 'spawn-error') {
    const error = await child.spawnError;
    const code = (error as NodeJS.ErrnoException).code;
    output.settle(
      'error',
      false,
      code === 'ENOENT'
        ? `engine binary not found: ${preset.binary}${preset.install ? ` (install: ${preset.install})` : ''}`
        : `cannot start ${preset.binary}: ${error.message}`,
    );
  }
}

/**
 * Whatever ended the turn, the process must go: after a result event it normally exits on its own
 * within the grace period; otherwise it is stopped in steps.
 */
async function stop(
  input: RunTurnInput,
  child: EngineProcess,
  first: First,
): Promise<RunOutcome['stoppedBy']> {
  if (child.pid === undefined) return 'never-started';
  if (first === 'result') await raceTimeout(child.exited, input.killGraceMs);
  // Even a leader that exited may leave children behind (a server the agent started).
  return terminateProcessGroup(child, child.exited, input.killGraceMs, {
    sandboxed: input.sandbox !== undefined,
  });
}

/** The process exited before any result event: judged by its protocol and its exit status. */
function settleExit(
  input: RunTurnInput,
  output: TurnOutput,
  exit: ExitStatus | { code: null; signal: null },
): void {
  const { preset } = input;
  const tail = summarize(output.tail(), 1000);
  const status = exit.signal ?? `code ${exit.code}`;
  if (PROTOCOL_REGISTRY[preset.protocol].hasResultEvent) {
    output.settle(
      'error',
      false,
      `${preset.binary} exited (${status}) without a result event${tail ? `: ${tail}` : ''}`,
    );
  } else if (exit.code === 0) {
    output.settle('exit', true, null);
  } else {
    output.settle('error', false, `${preset.binary} exited (${status})${tail ? `: ${tail}` : ''}`);
  }
}
