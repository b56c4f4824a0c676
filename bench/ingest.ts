/**
 * Webhook ingress throughput and latency (request sent → `202` received) against two floors, measured
 * side by side in the same run, in alternating rounds (bench/ingest-floors.ts):
 *
 *   fair floor   bare `node:http`, the HMAC check, and a durable insert of the delivery id and the body
 *                into SQLite opened with the daemon's own settings (src/store/db.ts openDb: WAL,
 *                synchronous FULL, busy_timeout, foreign_keys), group-committed (the requests that
 *                arrive while a commit runs go into the next transaction), 202 after the commit. The
 *                least any server can do and lose nothing: the goal is measured against it (≤ 1.3×,
 *                throughput and p50).
 *   bare floor   bare `node:http` and the HMAC check, answering 202 at once. It stores nothing, so no
 *                durable ingress can come near it: printed for information (the fsync of a commit
 *                alone costs more than a whole bare request).
 *
 *   npm run bench:ingest      (builds dist/ first: the daemon child runs bin/the-loop.js)
 *
 * Two pairs, each compared with its own floors:
 *   in-process   the daemon's ingress built as the daemon builds it (openDb + SqliteInbox with a
 *                scrubber holding the webhook secret and the token pattern + createIngressHandler
 *                routing with routeEvent + startHttpServer, nullLogger, no dispatcher), served from
 *                this process, versus the floors served from this process;
 *   child        the real daemon, `node bin/the-loop.js serve --port 0` (file logger, dispatcher,
 *                routing: every delivery is `issues.opened` without a mention, so it routes to
 *                `ignore` and no engine runs), versus each floor in a child process of its own.
 *
 * Load: test/fixtures/github/issues.opened.json compacted (what GitHub sends), a unique delivery id
 * per request, a keep-alive agent, BENCH_CONCURRENCY requests in flight, BENCH_REQUESTS per round,
 * BENCH_ROUNDS rounds after a warm-up of BENCH_WARMUP per server. The client always runs in a child
 * process of its own, so on a 2-core machine the server and the client each get one core and the
 * client's CPU never competes inside the event loop it measures (its own CPU use is printed: near 100%
 * means a round was client-bound, so the gap to a faster server is understated). The floor children
 * run this file under tsx (its loader thread is idle once loaded); the daemon runs the compiled dist/.
 * SQLite lives under os.tmpdir(), on the same disk for every server: a commit's fsync is most of a
 * durable request, so the disk sets the figures, and other load on the machine skews them: the load
 * average before the run is printed with them. What each server stored is counted at the end.
 * BENCH_CPU_PROF=<dir> writes --cpu-prof profiles of the children to <dir>/daemon, <dir>/fair-floor
 * and <dir>/bare-floor (the largest file of each is its main thread).
 */
import { type ChildProcess, fork, spawn } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Floor, type FloorKind, startFloor } from './ingest-floors.js';

const ROOT = join(import.meta.dirname, '..');
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 1000);
const CPU_PROF = process.env.BENCH_CPU_PROF;
const urlOf = (floor: Floor) => `http://127.0.0.1:${(floor.server.address() as AddressInfo).port}/`;

// ---------------------------------------------------------------------------------------------------
// The client (a child process): N requests, C in flight, latency to the response head.

interface LoadJob {
  url: string;
  count: number;
  concurrency: number;
  body: string;
  signature: string;
  idPrefix: string;
}
interface LoadResult {
  ms: number;
  /** CPU time the client itself used: near `ms`, the client (not the server) was the bottleneck. */
  clientCpuMs: number;
  latencies: number[];
  errors: string[];
}

async function runLoad(job: LoadJob): Promise<LoadResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: job.concurrency });
  const body = Buffer.from(job.body);
  const latencies = new Array<number>(job.count);
  const errors: string[] = [];
  let next = 0;
  const one = (i: number) =>
    new Promise<void>((resolve) => {
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
          latencies[i] = performance.now() - started;
          if (res.statusCode !== 202 && errors.length < 5) errors.push(`HTTP ${res.statusCode}`);
          res.resume();
          res.on('end', () => resolve());
          res.on('error', () => resolve());
        },
      );
      req.on('error', (error) => {
        latencies[i] = Number.NaN;
        if (errors.length < 5) errors.push(error.message);
        resolve();
      });
      req.end(body);
    });
  const start = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      while (next < job.count) await one(next++);
    }),
  );
  const ms = performance.now() - start;
  const used = process.cpuUsage(cpu);
  agent.destroy();
  return { ms, clientCpuMs: (used.user + used.system) / 1000, latencies, errors };
}

function clientRole(): void {
  process.on('message', (job: LoadJob) => {
    runLoad(job).then((result) => process.send?.(result));
  });
  process.on('disconnect', () => process.exit(0));
}

async function floorRole(kind: FloorKind): Promise<void> {
  const floor = await startFloor(kind, process.env.BENCH_SECRET ?? '', process.env.BENCH_DB ?? '');
  process.send?.({ port: (floor.server.address() as AddressInfo).port });
  const stop = () => {
    const stored = floor.stored();
    void floor.close().then(() => process.send?.({ stored }, () => process.exit(0)));
  };
  process.on('disconnect', () => floor.close().then(() => process.exit(0)));
  process.on('SIGTERM', stop);
}

// ---------------------------------------------------------------------------------------------------
// The orchestrator.

interface Target {
  name: string;
  url: string;
  rounds: LoadResult[];
  /** A child server's process: its CPU time per request is measured for each round. */
  pid?: number | undefined;
  cpuPerRequestMs: number[];
}

/**
 * CPU time (user + system) a process has used, in ms, from /proc (Linux; undefined elsewhere). Unlike
 * wall time it hardly moves with other load on the machine: what each request costs the server.
 */
function cpuMsOf(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the line (11 and 12 after the name), in clock ticks
    // (USER_HZ: 100 on Linux).
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return undefined;
  }
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] ?? Number.NaN;
const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

function once<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`${what} exited (${code}) before answering`));
    child.once('exit', onExit);
    child.once('message', (m) => {
      child.off('exit', onExit);
      resolve(m as T);
    });
  });
}

function stopChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM', ms = 10_000): Promise<void> {
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

async function main(): Promise<void> {
  const loadBefore = loadavg()[0] ?? 0; // other work on the machine skews every figure: shown with them
  const bin = join(ROOT, 'bin/the-loop.js');
  if (!existsSync(join(ROOT, 'dist/cli/main.js'))) {
    throw new Error('dist/ is missing: run `npm run build` first (npm run bench:ingest does)');
  }
  const fixture = JSON.parse(readFileSync(join(ROOT, 'test/fixtures/github/issues.opened.json'), 'utf8'));
  const body = JSON.stringify(fixture);
  if (body.includes('@the-loop')) throw new Error('the payload must not mention @the-loop (it would run)');
  const secret = randomBytes(24).toString('hex');
  const signature = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  const runId = randomBytes(4).toString('hex');
  const tmp = mkdtempSync(join(tmpdir(), 'the-loop-bench-ingest-'));
  const children: ChildProcess[] = [];
  const closers: Array<() => Promise<void> | void> = [];
  const onSignal = () => {
    for (const c of children) c.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  // One directory per child: node names each thread's profile itself (tsx's loader thread has one too).
  const profArgs = (name: string) => (CPU_PROF ? ['--cpu-prof', '--cpu-prof-dir', join(CPU_PROF, name)] : []);

  try {
    // The client: a child process of its own.
    const client = fork(import.meta.filename, ['client'], {
      cwd: ROOT,
      execArgv: ['--import', 'tsx'],
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    children.push(client);

    // In-process: the floors and the daemon's ingress, all served from this process.
    const bareIn = await startFloor('bare', secret, '');
    closers.push(() => bareIn.close());
    const fairIn = await startFloor('fair', secret, join(tmp, 'in-process/fair-floor.db'));
    closers.push(() => fairIn.close());
    const { openDb } = await import('../src/store/db.js');
    const { SqliteInbox } = await import('../src/store/sqlite/inbox.js');
    const { createIngressHandler } = await import('../src/github/ingress.js');
    const { routeEvent } = await import('../src/github/route.js');
    const { configSchema } = await import('../src/config/schema.js');
    const { startHttpServer } = await import('../src/web/server.js');
    const { nullLogger } = await import('../src/log/logger.js');
    const db = openDb(join(tmp, 'in-process/the-loop.db'));
    closers.push(() => {
      if (db.open) db.close();
    });
    // Scrubbed as the daemon's inbox is (guard/scrubber.ts: its secrets, and the capability tokens).
    const { SecretScrubber } = await import('../src/log/secret-scrubber.js');
    const { TOKEN_PATTERN } = await import('../src/core/capability-token.js');
    const scrubber = new SecretScrubber();
    scrubber.add(secret);
    scrubber.addPattern(TOKEN_PATTERN);
    const inbox = new SqliteInbox(db, { scrub: scrubber.scrub, mayHold: scrubber.mayHold });
    // Routed as the daemon routes (its config below): issues.opened without a mention → ignore.
    const routing = configSchema.parse({ repos: { 'acme/widgets': { path: tmp } } });
    const handler = createIngressHandler({
      secret,
      maxBodyBytes: 25 * 1024 * 1024,
      inbox,
      logger: nullLogger,
      onAccepted: () => {},
      route: (event, payload) => routeEvent(event, payload, routing),
    });
    const ingressIn = await startHttpServer({
      host: '127.0.0.1',
      port: 0,
      routes: { '/gh-webhook': handler },
      logger: nullLogger,
    });
    closers.push(() => ingressIn.close());

    // Child processes: the floors, and the real daemon.
    const forkFloor = async (kind: FloorKind) => {
      const child = fork(import.meta.filename, ['floor', kind], {
        cwd: ROOT,
        execArgv: ['--import', 'tsx', ...profArgs(`${kind}-floor`)],
        env: { ...process.env, BENCH_SECRET: secret, BENCH_DB: join(tmp, `${kind}-floor/floor.db`) },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      });
      children.push(child);
      const { port } = await once<{ port: number }>(child, `the ${kind} floor child`);
      return { child, url: `http://127.0.0.1:${port}/` };
    };
    const bareChild = await forkFloor('bare');
    const fairChild = await forkFloor('fair');

    const daemonDir = join(tmp, 'daemon');
    mkdirSync(daemonDir, { recursive: true });
    const configPath = join(daemonDir, 'config.yaml');
    writeFileSync(
      configPath,
      [
        `webhook:`,
        `  secret: ${secret}`,
        `repos:`,
        `  acme/widgets:`,
        `    path: ${JSON.stringify(daemonDir)}`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const env: NodeJS.ProcessEnv = { ...process.env, THE_LOOP_CONFIG: configPath };
    delete env.THE_LOOP_DATA_DIR;
    const daemon = spawn(process.execPath, [...profArgs('daemon'), bin, 'serve', '--port', '0'], {
      cwd: daemonDir,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(daemon);
    let daemonOut = '';
    daemon.stderr.on('data', (d: Buffer) => {
      daemonOut += d.toString();
    });
    const daemonUrl = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the daemon did not start:\n${daemonOut}`)), 30_000);
      daemon.once('exit', (code) => reject(new Error(`the daemon exited (${code}):\n${daemonOut}`)));
      daemon.stdout.on('data', (d: Buffer) => {
        daemonOut += d.toString();
        const url = /webhook\s+(http:\/\/127\.0\.0\.1:\d+\/gh-webhook)/.exec(daemonOut)?.[1];
        if (url && daemonOut.includes('Ready.')) {
          clearTimeout(timer);
          resolve(url);
        }
      });
    });

    const targets: Target[] = [
      { name: 'bare floor  in-process', url: urlOf(bareIn), rounds: [], cpuPerRequestMs: [] },
      { name: 'fair floor  in-process', url: urlOf(fairIn), rounds: [], cpuPerRequestMs: [] },
      { name: 'ingress     in-process', url: `${ingressIn.url}/gh-webhook`, rounds: [], cpuPerRequestMs: [] },
      {
        name: 'bare floor  child     ',
        url: bareChild.url,
        rounds: [],
        pid: bareChild.child.pid,
        cpuPerRequestMs: [],
      },
      {
        name: 'fair floor  child     ',
        url: fairChild.url,
        rounds: [],
        pid: fairChild.child.pid,
        cpuPerRequestMs: [],
      },
      { name: 'daemon      child     ', url: daemonUrl, rounds: [], pid: daemon.pid, cpuPerRequestMs: [] },
    ];
    let jobs = 0;
    const run = async (t: Target, count: number): Promise<LoadResult> => {
      const result = once<LoadResult>(client, 'the client');
      client.send({
        url: t.url,
        count,
        concurrency: CONCURRENCY,
        body,
        signature,
        idPrefix: `${runId}-${jobs++}`,
      } satisfies LoadJob);
      const r = await result;
      if (r.errors.length > 0) throw new Error(`${t.name.trim()}: ${r.errors.join('; ')}`);
      return r;
    };

    // Warm up every server (JIT, SQLite page cache, connections), then alternate rounds; the order
    // rotates each round so drift does not always favour the same server.
    for (const t of targets) await run(t, WARMUP);
    for (let r = 0; r < ROUNDS; r++) {
      for (let k = 0; k < targets.length; k++) {
        const t = targets[(k + r) % targets.length] as Target;
        const cpuBefore = cpuMsOf(t.pid);
        t.rounds.push(await run(t, REQUESTS));
        const cpuAfter = cpuMsOf(t.pid);
        if (cpuBefore !== undefined && cpuAfter !== undefined)
          t.cpuPerRequestMs.push((cpuAfter - cpuBefore) / REQUESTS);
      }
    }

    // Stop the daemon, then check what it stored (every delivery once, routed to `ignore`).
    await stopChild(daemon, 'SIGTERM');
    await stopChild(bareChild.child, 'SIGTERM');
    const fairChildRows = once<{ stored: number }>(fairChild.child, 'the fair floor child');
    await stopChild(fairChild.child, 'SIGTERM');
    const fairRows = { inProcess: fairIn.stored(), child: (await fairChildRows).stored };
    const { default: Database } = await import('better-sqlite3');
    const check = new Database(join(daemonDir, 'the-loop.db'), { readonly: true });
    const statuses = check.prepare('SELECT status, COUNT(*) AS n FROM deliveries GROUP BY status').all() as {
      status: string;
      n: number;
    }[];
    check.close();
    const inProcessRows = (db.prepare('SELECT COUNT(*) AS n FROM deliveries').get() as { n: number }).n;

    // Report.
    const stats = (t: Target) => {
      const all = t.rounds
        .flatMap((r) => r.latencies)
        .filter((x) => Number.isFinite(x))
        .sort((x, y) => x - y);
      const rps = t.rounds.map((r) => (REQUESTS / r.ms) * 1000);
      return {
        rps: median(rps),
        min: Math.min(...rps),
        max: Math.max(...rps),
        p50: percentile(all, 50),
        p99: percentile(all, 99),
        clientCpu: median(t.rounds.map((r) => r.clientCpuMs / r.ms)),
        cpuUs: t.cpuPerRequestMs.length > 0 ? median(t.cpuPerRequestMs) * 1000 : undefined,
      };
    };
    const s = targets.map(stats);
    console.log(
      `payload: issues.opened compacted, ${(Buffer.byteLength(body) / 1024).toFixed(1)} KiB; ${CONCURRENCY} in flight, keep-alive; ` +
        `${ROUNDS} rounds × ${REQUESTS.toLocaleString()} requests per server after ${WARMUP.toLocaleString()} warm-up; ` +
        `client in its own process; ${cpus().length} CPUs, load average ${loadBefore.toFixed(1)} before the run; node ${process.version}`,
    );
    console.log(
      'req/s: median of rounds [min–max]; latency request → 202 head, pooled over rounds; client CPU near 100%: client-bound;' +
        ' server CPU per request (children, median of rounds): what a request costs it, whatever else runs',
    );
    targets.forEach((t, i) => {
      const x = s[i] as ReturnType<typeof stats>;
      console.log(
        `${t.name}  ${x.rps.toFixed(0).padStart(6)} req/s [${x.min.toFixed(0)}–${x.max.toFixed(0)}]` +
          `  p50 ${x.p50.toFixed(2).padStart(6)} ms  p99 ${x.p99.toFixed(2).padStart(6)} ms` +
          `  (client CPU ${(x.clientCpu * 100).toFixed(0)}%)` +
          (x.cpuUs === undefined ? '' : `  server CPU ${x.cpuUs.toFixed(0)} µs/request`),
      );
    });
    // Each ratio says how many times the floor's figure ours is: its throughput over ours, our p50
    // and p99 over its own (1.00× = as fast as the floor, higher = slower).
    const ratio = (label: string, ours: number, floor: number, goal: string) => {
      const o = s[ours] as ReturnType<typeof stats>;
      const f = s[floor] as ReturnType<typeof stats>;
      const cpu =
        o.cpuUs !== undefined && f.cpuUs !== undefined ? `  CPU ${(o.cpuUs / f.cpuUs).toFixed(2)}×` : '';
      console.log(
        `ratio  ${label}  throughput ${(f.rps / o.rps).toFixed(2)}×  p50 ${(o.p50 / f.p50).toFixed(2)}×` +
          `  p99 ${(o.p99 / f.p99).toFixed(2)}×${cpu}   ${goal}`,
      );
    };
    ratio('ingress/fair floor  in-process', 2, 1, '(goal: throughput and p50 ≤ 1.3×)');
    ratio('daemon /fair floor  child     ', 5, 4, '(goal: throughput and p50 ≤ 1.3×)');
    ratio('ingress/bare floor  in-process', 2, 0, '(information: the bare floor stores nothing)');
    ratio('daemon /bare floor  child     ', 5, 3, '(information: the bare floor stores nothing)');
    const sent = (WARMUP + ROUNDS * REQUESTS).toLocaleString();
    console.log(
      `stored (sent ${sent} to each): in-process inbox ${inProcessRows.toLocaleString()} rows, fair floor ${fairRows.inProcess.toLocaleString()};` +
        ` daemon inbox ${statuses.map((x) => `${x.n.toLocaleString()} ${x.status}`).join(', ')}, fair floor child ${fairRows.child.toLocaleString()}`,
    );
    client.disconnect();
    await stopChild(client);
  } finally {
    for (const close of closers.reverse()) await close();
    for (const c of children) c.kill('SIGKILL');
    rmSync(tmp, { recursive: true, force: true });
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

const role = process.argv[2];
if (role === 'client') clientRole();
else if (role === 'floor') await floorRole(process.argv[3] === 'fair' ? 'fair' : 'bare');
else await main();
