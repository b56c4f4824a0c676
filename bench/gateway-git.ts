/**
 * The git proxy's cost on a large push: a ~50 MB commit of random (incompressible) data pushed by
 * the real git client through the gateway's git handler (head read and judged, body streamed,
 * report parsed on the way back) against the anchor — the same push straight to the same
 * `git http-backend` upstream — side by side in the same run, alternating sides run by run.
 *
 *   node --import tsx bench/gateway-git.ts          (BENCH_RUNS=5 BENCH_MB=50)
 *
 * Processes: git (the client, standing for the engine), this process (the gateway: a node:http
 * server mounting `handleGit`, as the daemon does), and a child running the upstream (node:http in
 * front of `git http-backend`, one CGI per request). Each run pushes into a fresh bare repository,
 * so every run sends the whole pack. The pack is written with `pack.compression=0`: deflating 50 MB
 * of random data would cost the client seconds on both sides alike and hide the hop's share.
 * Goal: gateway ≤ 1.2× direct at the median. The figures are printed, never asserted.
 */
import { type ChildProcess, execFileSync, fork } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { resolvePolicy } from '../src/acts/policy.js';
import { createBareRepo, startGitUpstream } from '../test/fixtures/git-upstream.js';
import { runGit, startHarness } from '../test/gateway/git-harness.js';

const ROLE_ENV = 'BENCH_GATEWAY_GIT_ROLE';

export interface GatewayGitBench {
  megabytes: number;
  runs: number;
  /** 1-minute load average before the run. */
  load: number;
  /** Wall time of each push, in ms, in run order. */
  directMs: number[];
  gatewayMs: number[];
  directMedianMs: number;
  gatewayMedianMs: number;
  /** gateway / direct at the median (goal ≤ 1.2). */
  ratio: number;
  /** Growth of the gateway process's RSS over the gateway runs, in MB. */
  gatewayRssGrowthMb: number;
  /** Acts the gateway recorded `succeeded`, and how many gateway pushes there were. */
  acts: { succeeded: number; expected: number };
}

interface UpstreamInfo {
  url: string;
  root: string;
  token: string;
}

/** The upstream child: a git smart HTTP server, alive until its parent disconnects. */
async function serveUpstream(): Promise<void> {
  const up = await startGitUpstream();
  process.send?.({ url: up.url, root: up.root, token: up.token } satisfies UpstreamInfo);
  process.once('disconnect', () => {
    void up.close().then(() => process.exit(0));
  });
}

function startUpstreamChild(): Promise<{ info: UpstreamInfo; proc: ChildProcess }> {
  const proc = fork(import.meta.filename, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, [ROLE_ENV]: 'upstream' },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((ok, fail) => {
    proc.once('message', (m) => ok({ info: m as UpstreamInfo, proc }));
    proc.once('exit', (code) => fail(new Error(`bench upstream exited with ${code}`)));
  });
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? 0) : ((s[mid - 1] ?? 0) + (s[mid] ?? 0)) / 2;
};

/** A work repository holding one commit of `megabytes` MB of random bytes. */
function bigCommit(root: string, megabytes: number): string {
  const work = join(root, 'work');
  const git = (...args: string[]) => execFileSync('git', args, { cwd: work, stdio: 'ignore' });
  execFileSync('git', ['init', '-q', '-b', 'main', work], { stdio: 'ignore' });
  const fd = openSync(join(work, 'random.bin'), 'w');
  for (let i = 0; i < megabytes; i++) writeSync(fd, randomBytes(1024 * 1024));
  closeSync(fd);
  git('-c', 'core.compression=0', 'add', 'random.bin');
  git('-c', 'user.name=Bench', '-c', 'user.email=bench@example.test', 'commit', '-q', '-m', 'random');
  return work;
}

export async function benchGatewayGit(
  options: { runs?: number; megabytes?: number } = {},
): Promise<GatewayGitBench> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 5);
  const megabytes = options.megabytes ?? Number(process.env.BENCH_MB ?? 50);
  const load = loadavg()[0] ?? 0;
  const root = mkdtempSync(join(tmpdir(), 'the-loop-bench-git-'));
  const { info, proc } = await startUpstreamChild();
  const harness = await startHarness({
    gitUrl: info.url,
    upstreamToken: info.token,
    policy: resolvePolicy(undefined, undefined, 'main'),
    owner: 'acme',
    repo: 'bench',
    home: root,
  });
  const directConfig = [
    '-c',
    `http.extraHeader=Authorization: Basic ${Buffer.from(`x-access-token:${info.token}`).toString('base64')}`,
  ];
  try {
    const work = bigCommit(root, megabytes);
    const push = async (side: 'direct' | 'gateway'): Promise<number> => {
      rmSync(join(info.root, 'acme', 'bench.git'), { recursive: true, force: true });
      createBareRepo(info.root, 'acme', 'bench');
      const url = side === 'direct' ? `${info.url}/acme/bench.git` : harness.remote('acme', 'bench');
      const args = [
        ...(side === 'direct' ? directConfig : []),
        '-c',
        'pack.compression=0',
        'push',
        '-q',
        url,
        'HEAD:refs/heads/bench',
      ];
      const started = performance.now();
      const r = await runGit(work, harness.gitEnv, ...args);
      const ms = performance.now() - started;
      if (r.code !== 0) throw new Error(`${side} push failed: ${r.stderr}`);
      return ms;
    };
    await push('direct'); // warm-up: page cache, upstream child, first connections
    await push('gateway');
    await harness.settled();
    harness.acts.length = 0;
    const directMs: number[] = [];
    const gatewayMs: number[] = [];
    const rssBefore = process.memoryUsage().rss;
    let rssPeak = rssBefore;
    for (let i = 0; i < runs; i++) {
      // Alternate which side goes first, so drift touches both alike.
      for (const side of i % 2 ? (['gateway', 'direct'] as const) : (['direct', 'gateway'] as const)) {
        const ms = await push(side);
        (side === 'direct' ? directMs : gatewayMs).push(ms);
        rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
      }
    }
    await harness.settled();
    const directMedianMs = median(directMs);
    const gatewayMedianMs = median(gatewayMs);
    return {
      megabytes,
      runs,
      load,
      directMs,
      gatewayMs,
      directMedianMs,
      gatewayMedianMs,
      ratio: gatewayMedianMs / directMedianMs,
      gatewayRssGrowthMb: (rssPeak - rssBefore) / 1024 / 1024,
      acts: { succeeded: harness.acts.filter((a) => a.outcome === 'succeeded').length, expected: runs },
    };
  } finally {
    await harness.close();
    proc.disconnect();
    await new Promise((ok) => (proc.exitCode === null ? proc.once('exit', ok) : ok(undefined)));
    rmSync(root, { recursive: true, force: true });
  }
}

export function printGatewayGit(r: GatewayGitBench): void {
  const f = (ms: number) => `${ms.toFixed(0).padStart(6)} ms`;
  console.log(
    `git push of ${r.megabytes} MB of random data through the git handler, ${r.runs} runs per side, alternating (load ${r.load.toFixed(2)} before)`,
  );
  console.log(`anchor  direct   ${r.directMs.map(f).join(' ')}   median ${f(r.directMedianMs)}`);
  console.log(`ours    gateway  ${r.gatewayMs.map(f).join(' ')}   median ${f(r.gatewayMedianMs)}`);
  console.log(`ratio   ${r.ratio.toFixed(3)}× direct at the median (goal ≤ 1.2×)`);
  console.log(
    `gateway process RSS growth ${r.gatewayRssGrowthMb.toFixed(1)} MB; acts succeeded ${r.acts.succeeded}/${r.acts.expected}`,
  );
}

if (process.env[ROLE_ENV] === 'upstream') void serveUpstream();
else if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  benchGatewayGit()
    .then(printGatewayGit)
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
