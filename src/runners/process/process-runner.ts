import { spawn } from 'node:child_process';
import { buildHeadlessArgv } from '../../engines/args.js';
import { PROTOCOL_REGISTRY } from '../../engines/protocols/index.js';
import { LineReader } from '../../engines/protocols/line-reader.js';
import { summarize } from '../../engines/protocols/protocol.js';
import type { TurnEvent } from '../../engines/protocols/types.js';
import type { EndReason } from '../../sessions/types.js';
import type { Runner, RunOutcome, RunTurnInput } from '../runner.js';
import { raceTimeout, terminateProcessGroup } from './terminate.js';

/** How much of stderr we keep to explain a failure. */
const STDERR_TAIL_BYTES = 8 * 1024;

/**
 * The `process` runner: each turn is one headless engine process, spawned with an argv array (never
 * a shell), in its own process group so that everything it starts can be stopped with it.
 *
 * One race decides how the turn ends, first writer wins: the engine's result event (`result`), the
 * process exiting (`exit`, or `error` when it failed), the backstop timer (`backstop`), or the
 * caller's AbortSignal (`cancel`). Whatever wins, the process is then stopped in steps (stdin close,
 * SIGTERM, SIGKILL) and the promise settles only when no process of the turn is left.
 */
export class ProcessRunner implements Runner {
  readonly name = 'process';

  async runTurn(input: RunTurnInput): Promise<RunOutcome> {
    const { preset } = input;
    const protocol = PROTOCOL_REGISTRY[preset.protocol];
    const argv = buildHeadlessArgv(preset, {
      engineSessionId: input.engineSessionId,
      first: input.first,
      prompt: input.prompt,
    });

    let ended: { reason: EndReason; at: Date; ok: boolean; error: string | null } | undefined;
    const settle = (reason: EndReason, ok: boolean, error: string | null) => {
      ended ??= { reason, at: new Date(), ok, error };
    };

    if (input.signal?.aborted) {
      return {
        ok: false,
        endReason: 'cancel',
        endedAt: new Date(),
        exitCode: null,
        exitSignal: null,
        error: 'cancelled before start',
        stoppedBy: 'never-started',
      };
    }

    const child = spawn(preset.binary, argv, {
      cwd: input.cwd,
      env: input.env,
      // stdin is a pipe we close at once: a headless engine must not wait for input, and the close is
      // the first step of the stop sequence for engines that read it.
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
      windowsHide: true,
    });
    child.stdin?.on('error', () => {});
    child.stdin?.end();

    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.once('exit', (code, signal) => resolve({ code, signal }));
    });
    const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
    const stdioClosed = new Promise<void>((resolve) => child.once('close', () => resolve()));

    let stderrTail = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      // Twice the tail is kept, scrubbed whole, then cut (see below): no secret is split at the cut.
      stderrTail = (stderrTail + chunk).slice(-2 * STDERR_TAIL_BYTES);
    });

    let turnEnd: Extract<TurnEvent, { type: 'turn-end' }> | undefined;
    let resultSeen: (() => void) | undefined;
    const resultPromise = new Promise<void>((resolve) => {
      resultSeen = resolve;
    });
    const emit = (events: TurnEvent[]) => {
      for (const event of events) {
        if (event.type === 'turn-end' && !turnEnd) {
          turnEnd = event;
          settle(
            'result',
            event.ok,
            event.ok ? null : (event.message ?? 'the engine reported a failed turn'),
          );
          resultSeen?.();
        }
        try {
          input.onEvent(event);
        } catch {
          // A failing observer must not break the turn or escape from a stream callback.
        }
      }
    };

    const parser = protocol.create();
    // Secrets are scrubbed from each whole line before anything parses, cuts or summarises it (a
    // key split by a truncation or a chunk boundary would escape the scrubber).
    const scrub = input.scrub ?? ((text: string) => text);
    {
      const reader = new LineReader({
        maxLineBytes: input.maxLineBytes,
        onLine: (line) => emit(parser.push(protocol.framing === 'jsonl' ? scrub(line) : `${scrub(line)}\n`)),
        onOversized: (bytes) =>
          emit([
            {
              type: 'diagnostic',
              message: `skipped an output line of ${bytes} bytes (limit ${input.maxLineBytes})`,
            },
          ]),
      });
      child.stdout?.on('data', (chunk: Buffer) => reader.push(chunk));
      child.stdout?.on('end', () => {
        reader.end();
        emit(parser.end());
      });
    }

    if (child.pid !== undefined) {
      try {
        input.onSpawn?.(child.pid);
      } catch {
        // Recording the pid is best effort; the turn goes on (and is stopped like any other).
      }
    }

    // The backstop is unref'd: it must never be what keeps a process alive (the child is, while it
    // runs); every path below clears it.
    let backstopTimer: NodeJS.Timeout | undefined;
    const backstop = new Promise<void>((resolve) => {
      backstopTimer = setTimeout(resolve, input.backstopMs);
      backstopTimer.unref();
    });
    let onAbort: (() => void) | undefined;
    const aborted = new Promise<void>((resolve) => {
      onAbort = () => resolve();
      input.signal?.addEventListener('abort', onAbort, { once: true });
    });

    // The race.
    const first = await Promise.race([
      resultPromise.then(() => 'result' as const),
      exited.then(() => 'exit' as const),
      spawnError.then(() => 'spawn-error' as const),
      backstop.then(() => 'backstop' as const),
      aborted.then(() => 'cancel' as const),
    ]);
    if (first === 'backstop') {
      settle(
        'backstop',
        false,
        `no end of turn after ${Math.round(input.backstopMs / 1000)} s; stopped by the backstop timer`,
      );
    } else if (first === 'cancel') {
      settle('cancel', false, 'cancelled');
    } else if (first === 'spawn-error') {
      const error = await spawnError;
      const code = (error as NodeJS.ErrnoException).code;
      settle(
        'error',
        false,
        code === 'ENOENT'
          ? `engine binary not found: ${preset.binary}${preset.install ? ` (install: ${preset.install})` : ''}`
          : `cannot start ${preset.binary}: ${error.message}`,
      );
    }

    // Whatever ended the turn, the process must go: after a result event it normally exits on its
    // own within the grace period; otherwise it is stopped in steps.
    let stoppedBy: RunOutcome['stoppedBy'];
    if (child.pid === undefined) {
      stoppedBy = 'never-started';
    } else if (first === 'result') {
      await raceTimeout(exited, input.killGraceMs);
      // Even a leader that exited may leave children behind (a server the agent started).
      stoppedBy = await terminateProcessGroup(child, exited, input.killGraceMs);
    } else {
      stoppedBy = await terminateProcessGroup(child, exited, input.killGraceMs);
    }
    clearTimeout(backstopTimer);
    if (onAbort) input.signal?.removeEventListener('abort', onAbort);

    const exit = child.pid === undefined ? { code: null, signal: null } : await exited;
    // 'exit' can come before the last stdout data is read (under load, it often does): wait for the
    // pipes to close — bounded, as a grandchild may hold them open — before judging the turn.
    if (child.pid !== undefined) await raceTimeout(stdioClosed, input.killGraceMs);

    if (!ended) {
      // The process exited before any result event.
      const tail = summarize(scrub(stderrTail).slice(-STDERR_TAIL_BYTES).trim(), 1000);
      if (protocol.hasResultEvent) {
        settle(
          'error',
          false,
          `${preset.binary} exited (${exit.signal ?? `code ${exit.code}`}) without a result event${tail ? `: ${tail}` : ''}`,
        );
      } else if (exit.code === 0) {
        settle('exit', true, null);
      } else {
        settle(
          'error',
          false,
          `${preset.binary} exited (${exit.signal ?? `code ${exit.code}`})${tail ? `: ${tail}` : ''}`,
        );
      }
    }
    const end = ended as NonNullable<typeof ended>;
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
}
