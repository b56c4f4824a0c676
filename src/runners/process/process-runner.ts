import { buildHeadlessArgv } from '../../engines/args.js';
import type { EnginePreset } from '../../engines/preset.js';
import { PROTOCOL_REGISTRY } from '../../engines/protocols/index.js';
import { whichBinary } from '../../engines/which.js';
import type { SentKey } from '../keys.js';
import type { Keyed, Runner, RunOutcome, RunTurnInput } from '../runner.js';
import { type EngineProcess, type SpawnRequest, spawnPipe } from './engine-process.js';
import { notRun, runProcess } from './process-turn.js';
import { type PtyKeysContext, sendTurnKeys, serveTurnKeys } from './pty-keys.js';
import { loadNodePty, spawnPty } from './pty-process.js';
import { TurnOutput } from './turn-output.js';

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

export interface ProcessRunnerOptions {
  /**
   * The data dir: each PTY turn listens for keys on a socket in its runtime directory (see
   * pty-keys.ts and os/runtime-dir.ts). Without it, PTY turns run but take no keys.
   */
  dataDir?: string | undefined;
  /** The environment the runtime directory is found from (TMPDIR); default: this process's. */
  env?: Readonly<Record<string, string | undefined>> | undefined;
  /** A session's status in the registry: a turn's keys socket refuses requests once it is not `active`. */
  sessionStatus?: ((sessionId: string) => Promise<string | undefined>) | undefined;
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
export class ProcessRunner implements Runner, Keyed {
  readonly name = 'process';
  readonly mode = 'headless';

  constructor(private readonly options: ProcessRunnerOptions = {}) {}

  async runTurn(input: RunTurnInput): Promise<RunOutcome> {
    const { preset } = input;
    const argv = buildHeadlessArgv(preset, {
      engineSessionId: input.engineSessionId,
      first: input.first,
      prompt: input.prompt,
    });
    if (input.signal?.aborted) return notRun('cancel', 'cancelled before start');
    // Loaded only for PTY engines: a machine without a working node-pty fails those alone, clearly.
    const pty = preset.pty ? await loadNodePty() : undefined;
    const output = new TurnOutput(input, PROTOCOL_REGISTRY[preset.protocol]);
    const request = spawnRequestOf(input, argv, pty !== undefined);
    let started: EngineProcess | undefined;
    // The keys socket listens before the engine starts, so it is there for the whole turn.
    const keysContext = pty ? this.keysContext() : undefined;
    const keys = keysContext
      ? await serveTurnKeys(
          keysContext,
          input.session,
          () => started,
          (events) => output.emit(events),
        )
      : undefined;
    try {
      // Everything below is the same for both: what differs between pipes and a PTY is behind EngineProcess.
      const child = pty ? spawnPty(pty, request, output.sinks) : spawnPipe(request, output.sinks);
      started = child;
      if (child.pid !== undefined) {
        try {
          input.onSpawn?.(child.pid);
        } catch {
          // Recording the pid is best effort; the turn goes on (and is stopped like any other).
        }
      }
      return await runProcess(input, child, output, keys);
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
