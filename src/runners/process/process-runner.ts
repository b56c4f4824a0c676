import type { TurnEvent } from '../../core/events.js';
import type { EndReason } from '../../core/ports/sessions.js';
import { buildHeadlessArgv } from '../../engines/args.js';
import type { EnginePreset } from '../../engines/preset.js';
import { PROTOCOL_REGISTRY } from '../../engines/protocols/index.js';
import { LineReader } from '../../engines/protocols/line-reader.js';
import { summarize } from '../../engines/protocols/protocol.js';
import { whichBinary } from '../../engines/which.js';
import type { SentKey } from '../keys.js';
import type { Runner, RunOutcome, RunTurnInput } from '../runner.js';
import { type EngineProcess, type OutputSinks, type SpawnRequest, spawnPipe } from './engine-process.js';
import { type PtyKeysContext, sendTurnKeys, serveTurnKeys } from './pty-keys.js';
import { loadNodePty, spawnPty } from './pty-process.js';
import { raceTimeout, terminateProcessGroup } from './terminate.js';

/**
 * What is spawned: the engine itself, or the sandbox running it (its binary resolved here, as the
 * sandbox's PATH lookup would find the same file but report a missing one less clearly).
 */
function spawnRequestOf(input: RunTurnInput, argv: string[], terminal: boolean): SpawnRequest {
  const { preset } = input;
  if (!input.sandbox) return { binary: preset.binary, argv, cwd: input.cwd, env: input.env };
  const binary = whichBinary(preset.binary, input.env.PATH, input.cwd) ?? preset.binary;
  const wrap = input.sandbox({ terminal });
  return { binary: wrap.file, argv: [...wrap.args, binary, ...argv], cwd: input.cwd, env: input.env };
}

/** How much of stderr (on a PTY: of the merged output) we keep to explain a failure. */
const STDERR_TAIL_BYTES = 8 * 1024;

export interface ProcessRunnerOptions {
  /**
   * The data dir: each PTY turn listens for keys on a socket in its runtime directory (see
   * pty-keys.ts and os/runtime-dir.ts). Without it, PTY turns run but take no keys.
   */
  dataDir?: string | undefined;
  /** The environment the runtime directory is found from (TMPDIR); default: this process's. */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /** A session's status in the registry: a turn's keys socket refuses requests once it is not `active`. */
  sessionStatus?: ((sessionId: string) => string | undefined) | undefined;
}

/**
 * The `process` runner: each turn is one headless engine process, spawned with an argv array (never
 * a shell), in its own process group so that everything it starts can be stopped with it — with
 * pipes, or on a PTY for engines with `pty: true` (then people can press keys in it while it runs).
 *
 * One race decides how the turn ends, first writer wins: the engine's result event (`result`), the
 * process exiting (`exit`, or `error` when it failed), the backstop timer (`backstop`), or the
 * caller's AbortSignal (`cancel`). Whatever wins, the process is then stopped in steps (stdin close,
 * SIGTERM, SIGKILL) and the promise settles only when no process of the turn is left.
 */
export class ProcessRunner implements Runner {
  readonly name = 'process';

  constructor(private readonly options: ProcessRunnerOptions = {}) {}

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
    // Loaded only for PTY engines: a machine without a working node-pty fails those alone, clearly.
    const pty = preset.pty ? await loadNodePty() : undefined;

    let stderrTail = '';
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
    const sinks: OutputSinks = {
      onOutput: (chunk) => reader.push(chunk),
      onOutputEnd: () => {
        reader.end();
        emit(parser.end());
      },
      onDiagnosticText: (text) => {
        // Twice the tail is kept, scrubbed whole, then cut (see below): no secret is split at the cut.
        stderrTail = (stderrTail + text).slice(-2 * STDERR_TAIL_BYTES);
      },
    };

    const request = spawnRequestOf(input, argv, pty !== undefined);
    let started: EngineProcess | undefined;
    // The keys socket listens before the engine starts, so it is there for the whole turn.
    const keysContext = pty ? this.keysContext() : undefined;
    const keys = keysContext
      ? await serveTurnKeys(keysContext, input.session, () => started, emit)
      : undefined;
    try {
      // Everything below is the same for both: what differs between pipes and a PTY is behind EngineProcess.
      const child = pty ? spawnPty(pty, request, sinks) : spawnPipe(request, sinks);
      started = child;
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
        // Aborted while the turn was being set up (node-pty loading, the keys socket): no event comes.
        if (input.signal?.aborted) resolve();
        else input.signal?.addEventListener('abort', onAbort, { once: true });
      });

      // The race.
      const first = await Promise.race([
        resultPromise.then(() => 'result' as const),
        child.exited.then(() => 'exit' as const),
        child.spawnError.then(() => 'spawn-error' as const),
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
        const error = await child.spawnError;
        const code = (error as NodeJS.ErrnoException).code;
        settle(
          'error',
          false,
          code === 'ENOENT'
            ? `engine binary not found: ${preset.binary}${preset.install ? ` (install: ${preset.install})` : ''}`
            : `cannot start ${preset.binary}: ${error.message}`,
        );
      }
      // The turn's end is decided: no more keys.
      await keys?.close();

      // Whatever ended the turn, the process must go: after a result event it normally exits on its
      // own within the grace period; otherwise it is stopped in steps.
      let stoppedBy: RunOutcome['stoppedBy'];
      if (child.pid === undefined) {
        stoppedBy = 'never-started';
      } else if (first === 'result') {
        await raceTimeout(child.exited, input.killGraceMs);
        // Even a leader that exited may leave children behind (a server the agent started).
        stoppedBy = await terminateProcessGroup(child, child.exited, input.killGraceMs, {
          sandboxed: input.sandbox !== undefined,
        });
      } else {
        stoppedBy = await terminateProcessGroup(child, child.exited, input.killGraceMs, {
          sandboxed: input.sandbox !== undefined,
        });
      }
      clearTimeout(backstopTimer);
      if (onAbort) input.signal?.removeEventListener('abort', onAbort);

      const exit = child.pid === undefined ? { code: null, signal: null } : await child.exited;
      // 'exit' can come before the last output is read (under load, it often does): take what is
      // left and wait for the output to close — bounded, as a grandchild may hold pipes open —
      // before judging the turn.
      child.finishOutput();
      if (child.pid !== undefined) await raceTimeout(child.outputClosed, input.killGraceMs);

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
    } finally {
      // Idempotent; here for a turn that threw: its terminal and keys socket are released all the same.
      started?.finishOutput();
      await keys?.close();
    }
  }

  /**
   * `the-loop sessions keys` for a process-runner session: the keys go to the keys socket of its
   * running PTY turn (see pty-keys.ts). An engine not on a PTY, or no turn running, is a clear error.
   */
  sendKeys(
    session: { workItem: string; slug: string },
    preset: EnginePreset | undefined,
    words: readonly string[],
  ): Promise<{ target: string; sent: SentKey[] }> {
    return sendTurnKeys(this.keysContext(), session, preset, words);
  }

  private keysContext(): PtyKeysContext | undefined {
    const { dataDir, env, sessionStatus } = this.options;
    return dataDir ? { dataDir, env: env ?? process.env, sessionStatus } : undefined;
  }
}
