/**
 * The load client of bench/store.ts (a child process of its own): signed `issues` webhooks, N
 * requests with C in flight on a keep-alive agent, each timed from sent to the response head (202).
 * The same client as bench/ingest.ts's (which exports nothing: importing it would run it), kept to
 * what bench/store.ts needs, plus small helpers for children and percentiles.
 */
import type { ChildProcess } from 'node:child_process';
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';

export interface LoadJob {
  url: string;
  count: number;
  concurrency: number;
  body: string;
  signature: string;
  idPrefix: string;
}

export interface LoadResult {
  ms: number;
  /** CPU time the client itself used: near `ms`, the client (not the server) was the bottleneck. */
  clientCpuMs: number;
  latencies: number[];
  errors: string[];
}

function send(agent: Agent, job: LoadJob, body: Buffer, i: number, errors: string[]): Promise<number> {
  return new Promise<number>((resolve) => {
    const started = performance.now();
    const req = request(
      job.url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': body.length,
          'user-agent': 'GitHub-Hookshot/bench',
          'x-github-event': 'issues',
          'x-github-delivery': `${job.idPrefix}-${i}`,
          'x-hub-signature-256': job.signature,
        },
      },
      (res) => {
        const ms = performance.now() - started;
        if (res.statusCode !== 202 && errors.length < 5) errors.push(`HTTP ${res.statusCode}`);
        res.resume();
        res.on('end', () => resolve(ms));
        res.on('error', () => resolve(ms));
      },
    );
    req.on('error', (error) => {
      if (errors.length < 5) errors.push(error.message);
      resolve(Number.NaN);
    });
    req.end(body);
  });
}

export async function runLoad(job: LoadJob): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: job.concurrency });
  const body = Buffer.from(job.body);
  const latencies = new Array<number>(job.count);
  const errors: string[] = [];
  let next = 0;
  const start = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      while (next < job.count) {
        const i = next++;
        latencies[i] = await send(agent, job, body, i, errors);
      }
    }),
  );
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  agent.destroy();
  return { ms, clientCpuMs: (used.user + used.system) / 1000, latencies, errors };
}

/** The client child's role: a job per message, its result sent back. */
export function clientRole(): void {
  process.on('message', (job: LoadJob) => {
    runLoad(job).then((result) => process.send?.(result));
  });
  process.on('disconnect', () => process.exit(0));
}

export const median = (xs: number[]) =>
  [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? Number.NaN;

export const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

/** The first message of a child, or why it exited first. */
export function once<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`${what} exited (${code}) before answering`));
    child.once('exit', onExit);
    child.once('message', (m) => {
      child.off('exit', onExit);
      resolve(m as T);
    });
  });
}

/** Signal a child and wait for it to exit (SIGKILL after `ms`). */
export function stopChild(
  child: ChildProcess,
  signal: NodeJS.Signals = 'SIGTERM',
  ms = 10_000,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill(signal);
  });
}
