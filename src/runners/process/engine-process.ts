import { spawn } from 'node:child_process';
import type { StoppableProcess } from './terminate.js';

/**
 * One started engine process, however it was started: with pipes (`spawnPipe`) or on a PTY
 * (`spawnPty`). The process runner's race and stop sequence work on this shape only, so both ways of
 * starting an engine share them.
 */
export interface ExitStatus {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface EngineProcess extends StoppableProcess {
  /** Undefined when the process never started. */
  readonly pid: number | undefined;
  /** Resolves when the leader has exited (never, when it never started). */
  readonly exited: Promise<ExitStatus>;
  /** Resolves when the process could not be started (never, when it was). */
  readonly spawnError: Promise<Error>;
  /** Resolves when all its output has been read (the pipes or the PTY closed). */
  readonly outputClosed: Promise<void>;
  /**
   * Called once the process group is stopped: read whatever output is left and close it. Pipes close
   * on their own when the last writer is gone; a PTY is closed here (see pty-process.ts).
   */
  finishOutput(): void;
  /** Type into the engine's terminal (PTY only). Rejects when it cannot (the engine is gone). */
  write?(bytes: string): Promise<void>;
}

export interface SpawnRequest {
  binary: string;
  argv: string[];
  cwd: string;
  /** The engine's whole environment (credentials travel here, never in argv). */
  env: Record<string, string>;
}

/** Where a process's output goes. */
export interface OutputSinks {
  /** The bytes the protocol parses: stdout (on a PTY: everything the engine writes). */
  onOutput(chunk: Buffer): void;
  /** No more output will come. Called once. */
  onOutputEnd(): void;
  /** Text kept to explain a failure: stderr (on a PTY: everything the engine writes). */
  onDiagnosticText(text: string): void;
}

/** A process that never started, with the reason. */
export function notStarted(error: Error): EngineProcess {
  return {
    pid: undefined,
    // A fresh promise: racing a shared never-settling one would leak a reaction per call.
    exited: new Promise<never>(() => {}),
    spawnError: Promise.resolve(error),
    outputClosed: Promise.resolve(),
    hasExited: () => true,
    closeInput: () => false,
    finishOutput: () => {},
  };
}

/**
 * Start the engine with pipes, detached (the leader of its own process group), never a shell. stdin is
 * a pipe closed at once: a headless engine must not wait for input, and the close is the first step of
 * the stop sequence for engines that read it.
 */
export function spawnPipe(request: SpawnRequest, sinks: OutputSinks): EngineProcess {
  const child = spawn(request.binary, request.argv, {
    cwd: request.cwd,
    env: request.env,
    stdio: ['pipe', 'pipe', 'pipe'],
    detached: true,
    windowsHide: true,
  });
  child.stdin?.on('error', () => {});
  child.stdin?.end();

  const exited = new Promise<ExitStatus>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
  const outputClosed = new Promise<void>((resolve) => child.once('close', () => resolve()));

  child.stderr?.setEncoding('utf8');
  child.stderr?.on('data', (chunk: string) => sinks.onDiagnosticText(chunk));
  child.stdout?.on('data', (chunk: Buffer) => sinks.onOutput(chunk));
  child.stdout?.on('end', () => sinks.onOutputEnd());

  return {
    pid: child.pid,
    exited,
    spawnError,
    outputClosed,
    hasExited: () => child.exitCode !== null || child.signalCode !== null,
    finishOutput: () => {},
    closeInput: () => {
      if (!child.stdin || child.stdin.destroyed) return false;
      child.stdin.end();
      return true;
    },
  };
}
