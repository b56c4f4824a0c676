/**
 * Runs a real engine CLI (claude, codex, gemini) as a child process for the real-*-mock tests:
 * collects stdout/stderr, parses stdout as JSONL events, kills a run that overstays, and kills
 * whatever is still running when the test file is done.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { isRecord } from '../fixtures/mock-apis/serve.js';

export { isRecord };

/** One JSONL event the CLI printed: an object with a string `type`. */
export interface EngineEvent {
  type: string;
  [key: string]: unknown;
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** stdout's JSON lines that are objects with a string `type`, in order. */
  events: EngineEvent[];
  ms: number;
}

/** Where and with which environment the CLI runs. */
export interface RunContext {
  cwd: string;
  env: Record<string, string>;
}

/** The events in JSONL `stdout` (blank lines skipped; a line that is not JSON throws). */
export function parseEvents(stdout: string): EngineEvent[] {
  const events: EngineEvent[] = [];
  for (const line of stdout.split('\n')) {
    if (line.trim() === '') continue;
    const v: unknown = JSON.parse(line);
    if (isRecord(v) && typeof v.type === 'string') events.push(v as EngineEvent);
  }
  return events;
}

/** The named fields of an event's `usage` object, each of which must be a number. */
export function usageNumbers<K extends string>(usage: unknown, keys: readonly K[]): Record<K, number> {
  if (!isRecord(usage)) throw new Error('event has no usage');
  const out = {} as Record<K, number>;
  for (const k of keys) {
    const v = usage[k];
    if (typeof v !== 'number') throw new Error(`usage.${k} is not a number`);
    out[k] = v;
  }
  return out;
}

export interface EngineRunner {
  /** Run the CLI with `args` to its exit; SIGKILLed after the runner's `killAfterMs`. */
  run(ctx: RunContext, args: string[]): Promise<RunResult>;
  /** SIGKILL every run of this runner that has not exited yet (for `afterAll`). */
  killAll(): void;
}

export function engineRunner(bin: string, killAfterMs: number): EngineRunner {
  const running = new Set<ChildProcess>();

  const run = (ctx: RunContext, args: string[]): Promise<RunResult> =>
    new Promise((resolve, reject) => {
      const started = Date.now();
      const child = spawn(bin, args, { cwd: ctx.cwd, env: ctx.env, stdio: ['ignore', 'pipe', 'pipe'] });
      running.add(child);
      const out = { stdout: '', stderr: '' };
      for (const stream of ['stdout', 'stderr'] as const) {
        child[stream].setEncoding('utf8').on('data', (d: string) => {
          out[stream] += d;
        });
      }
      // Only the process this run started.
      const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
      child.on('error', (err) => {
        clearTimeout(timer);
        running.delete(child);
        reject(err);
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        running.delete(child);
        const { stdout, stderr } = out;
        try {
          resolve({ code, signal, stdout, stderr, events: parseEvents(stdout), ms: Date.now() - started });
        } catch (err) {
          reject(new Error(`unparsable stdout (${String(err)}):\n${stdout}\n--- stderr ---\n${stderr}`));
        }
      });
    });

  const killAll = (): void => {
    for (const child of running) {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
    running.clear();
  };

  return { run, killAll };
}
