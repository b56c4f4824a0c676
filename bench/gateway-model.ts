/**
 * The model proxy's cost on a streamed answer: a ~1 MB Anthropic-style SSE response through the
 * gateway as the daemon runs it against the anchor — the same request straight to the upstream —
 * side by side in the same run.
 *
 *   node --import tsx bench/gateway-model.ts        (BENCH_RUNS=100 BENCH_BYTES=1000000)
 *
 * Three processes, as in production: the client (this one, standing for the engine), the gateway
 * (a child) and the upstream (a child: a local model API). The gateway child is the daemon's
 * listener: `GatewayService` (so `startGateway`, its routing and its token check) on a temporary
 * SQLite database, a session and a capability token minted by `GatewayTokens`, and the handlers
 * `main-guard.ts` mounts, with its options. The client calls `/m/<token>/v1/messages` with the
 * token as `x-api-key`, as Claude Code does. Only the daemon's ports are stand-ins: the model
 * route (this upstream, a fake key) and the ledger (a counter; the real one writes a row after the
 * response has ended, outside what is timed).
 *
 * Two upstream behaviours: `burst` writes the whole answer as fast as the socket takes it
 * (throughput: worst case for a hop), `paced` writes one ~1 KB event per event-loop turn (each
 * event crosses the proxy as its own chunk, as a model's token stream does). A second anchor,
 * `floor`, is a bare node:http relay in the gateway's process (no token, no swap, no meter): what
 * any Node proxy hop costs on this machine, so the gateway's own share shows. Runs rotate the sides
 * on keep-alive connections, so drift and warm-up touch all alike. Goals: total ≤ 1.1× direct at
 * p50, time to first byte ≤ +1 ms at p50. The figures are printed, never asserted.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { GatewayPorts } from '../src/gateway/types.js';

const WARMUP = 20;
/** Set in the children this file forks: which part it plays (an env var, so importing it never does). */
const ROLE_ENV = 'BENCH_GATEWAY_MODEL_ROLE';
const SCENARIOS = ['burst', 'paced'] as const;
const SIDES = ['direct', 'floor', 'gateway'] as const;
type Scenario = (typeof SCENARIOS)[number];
type Side = (typeof SIDES)[number];

/** p50 and p90, in ms. */
type Spread = [number, number];
export interface SideFigures {
  totalMs: Spread;
  ttfbMs: Spread;
}
export interface ScenarioFigures {
  sides: Record<Side, SideFigures>;
  /** gateway / direct, total time at p50 (goal ≤ 1.1). */
  totalRatio: number;
  /** floor / direct, total time at p50: what a bare relay costs here. */
  floorRatio: number;
  /** gateway / floor, total time at p50: the gateway's own share. */
  totalVsFloor: number;
  /** gateway − direct, time to first byte at p50, in ms (goal ≤ 1). */
  ttfbDeltaMs: number;
  /** floor − direct, time to first byte at p50, in ms. */
  floorTtfbDeltaMs: number;
}
export interface GatewayModelBench {
  bytes: number;
  runs: number;
  /** 1-minute load average before the run. */
  load: number;
  scenarios: Record<Scenario, ScenarioFigures>;
  /** Complete wire rows the gateway recorded, and how many gateway runs there were. */
  rows: { recorded: number; expected: number };
}

// ---- the upstream child: a model API streaming ~BENCH_BYTES of SSE per POST ----

function serveUpstream(bytes: number): void {
  const delta = `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'x'.repeat(1000) } })}\n\n`;
  const count = Math.max(1, Math.round(bytes / Buffer.byteLength(delta)));
  const usage = { input_tokens: 100, output_tokens: 1 };
  const start = `event: message_start\ndata: ${JSON.stringify({ type: 'message_start', message: { id: 'msg_bench', model: 'claude-bench', usage } })}\n\n`;
  const end = `event: message_delta\ndata: ${JSON.stringify({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: count } })}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n`;
  const tick = () => new Promise((r) => setImmediate(r));
  const server = http.createServer((req, res) => {
    const paced = (req.url ?? '').includes('paced');
    req.resume();
    req.on('end', async () => {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      res.write(start);
      for (let i = 0; i < count; i++) {
        if (paced) await tick();
        if (!res.write(delta)) await new Promise((r) => res.once('drain', r));
      }
      res.end(end);
    });
  });
  process.once('disconnect', () => process.exit(0));
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
}

// ---- the gateway child: the daemon's gateway, and a bare relay beside it ----

interface GatewayInfo {
  gateway: string;
  floor: string;
  token: string;
}

/** The floor: the least a node:http relay does (no token check, no header rewrite, no meter). */
function startFloor(upstream: string): Promise<http.Server> {
  const agent = new http.Agent({ keepAlive: true });
  const server = http.createServer((req, res) => {
    const out = http.request(upstream + (req.url ?? '/'), {
      method: req.method,
      headers: req.headers,
      agent,
    });
    out.on('response', (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    req.pipe(out);
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

async function serveGateway(upstream: string): Promise<void> {
  const { configSchema } = await import('../src/config/schema.js');
  const { GatewayService } = await import('../src/gateway/listen.js');
  const { createModelHandler } = await import('../src/gateway/models/model-proxy.js');
  const { createGitHandler } = await import('../src/gateway/git/git-proxy.js');
  const { createGitHubApiHandler } = await import('../src/gateway/github/api-proxy.js');
  const { GatewayTokens } = await import('../src/gateway/tokens.js');
  const { SqliteSessionStore } = await import('../src/store/sqlite/sessions.js');
  const { SqliteTokenStore } = await import('../src/store/sqlite/tokens.js');
  const { openDb } = await import('../src/store/db.js');
  const { createLogger, memorySink } = await import('../src/log/logger.js');
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-bench-gw-'));
  const db = openDb(join(dir, 'the-loop.db'));
  const store = new SqliteSessionStore(db, { scrub: (t) => t });
  const session = await store.create({
    workItem: 'github:acme/bench#1',
    slug: 'github-acme-bench-1',
    engine: 'claude',
    runner: 'process',
    engineSessionId: null,
    cwd: dir,
    credentialKind: null,
    credentialEnv: null,
  });
  const tokens = new GatewayTokens(new SqliteTokenStore(db));
  const token = await tokens.mint(session.id);
  // The daemon's level: the handler's per-request debug line is built, then filtered out.
  const logger = createLogger({ level: 'info', sinks: [memorySink()] });
  let rows = 0;
  const ports: GatewayPorts = {
    logger,
    policyFor: () => ({}) as never,
    recordAct: async () => {},
    recordUsage: async (_s, u) => {
      if (!u.partial) rows += 1;
    },
    modelRoute: () => ({ api: 'anthropic', upstream, credential: { value: 'sk-bench', kind: 'api-key' } }),
    overBudget: async () => undefined,
    github: { gitUrl: 'http://127.0.0.1:9', apiUrl: 'http://127.0.0.1:9', tokenFor: async () => undefined },
  };
  // As main-guard.ts composes it, with the config's defaults.
  const config = configSchema.parse({ gateway: { port: 0 } });
  const idleTimeoutMs = config.gateway.idleTimeoutSeconds * 1000;
  const maxBodyBytes = config.gateway.maxBodyBytes;
  const model = createModelHandler({ idleTimeoutMs, maxRequestBytes: maxBodyBytes });
  const service = new GatewayService({
    config,
    dataDir: dir,
    // Its runtime directory (the gh socket's) inside the temporary one, removed with it.
    env: { TMPDIR: dir },
    logger,
    store,
    tokens,
    ports,
    routes: {
      git: createGitHandler({ idleTimeoutMs }),
      github: createGitHubApiHandler({ idleTimeoutMs, maxBodyBytes }),
      model,
    },
    onClose: () => model.close(),
  });
  await service.start();
  const floor = await startFloor(upstream);
  process.on('message', () => process.send?.({ rows }));
  process.once('disconnect', () => {
    floor.closeAllConnections();
    floor.close();
    void service.stop().finally(() => {
      db.close();
      rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    });
  });
  const gateway = service.endpoint()?.url ?? '';
  const floorUrl = `http://127.0.0.1:${(floor.address() as AddressInfo).port}`;
  process.send?.({ gateway, floor: floorUrl, token } satisfies GatewayInfo);
}

// ---- the client: this process ----

function child<T>(role: string, env: Record<string, string>): { proc: ChildProcess; ready: Promise<T> } {
  const proc = fork(import.meta.filename, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env, [ROLE_ENV]: role },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ready = new Promise<T>((ok, fail) => {
    proc.once('message', (m) => ok(m as T));
    proc.once('exit', (code) => fail(new Error(`bench ${role} exited with ${code}`)));
  });
  return { proc, ready };
}

/** A child ends when its channel closes (the gateway removes its database first); killed if it hangs. */
async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((ok) => proc.once('exit', ok));
  if (proc.connected) proc.disconnect();
  const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

const BODY = JSON.stringify({
  model: 'claude-bench',
  max_tokens: 32000,
  stream: true,
  messages: [{ role: 'user', content: 'go' }],
});

/** One request: time to the first body byte and to the end, in ms; the bytes received. */
function timeOne(
  agent: http.Agent,
  url: string,
  token: string,
): Promise<{ ttfb: number; total: number; bytes: number }> {
  return new Promise((ok, fail) => {
    const t0 = process.hrtime.bigint();
    let ttfb = 0;
    let bytes = 0;
    const headers = {
      'content-type': 'application/json',
      'x-api-key': token,
      'content-length': Buffer.byteLength(BODY),
    };
    const req = http.request(url, { method: 'POST', agent, headers });
    req.on('response', (res) => {
      res.on('data', (chunk: Buffer) => {
        if (bytes === 0) ttfb = Number(process.hrtime.bigint() - t0) / 1e6;
        bytes += chunk.length;
      });
      res.on('end', () => ok({ ttfb, total: Number(process.hrtime.bigint() - t0) / 1e6, bytes }));
      res.on('error', fail);
    });
    req.on('error', fail);
    req.end(BODY);
  });
}

const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))] ?? Number.NaN;
const spread = (xs: number[]): Spread => [pct(xs, 0.5), pct(xs, 0.9)];

async function measure(
  agent: http.Agent,
  urls: Record<Side, string>,
  token: string,
  runs: number,
): Promise<{ figures: ScenarioFigures; bytes: number }> {
  const times = Object.fromEntries(
    SIDES.map((s) => [s, { ttfb: [] as number[], total: [] as number[] }]),
  ) as Record<Side, { ttfb: number[]; total: number[] }>;
  const sizes = new Set<number>();
  for (let i = 0; i < WARMUP; i++) for (const side of SIDES) await timeOne(agent, urls[side], token);
  for (let i = 0; i < runs; i++) {
    // Rotate which side goes first, so none always follows another.
    for (let k = 0; k < SIDES.length; k++) {
      const side = SIDES[(i + k) % SIDES.length] as Side;
      const t = await timeOne(agent, urls[side], token);
      times[side].ttfb.push(t.ttfb);
      times[side].total.push(t.total);
      sizes.add(t.bytes);
    }
  }
  if (sizes.size !== 1)
    throw new Error(`the sides received different bodies: ${[...sizes].join(', ')} bytes`);
  const sides = Object.fromEntries(
    SIDES.map((s) => [s, { totalMs: spread(times[s].total), ttfbMs: spread(times[s].ttfb) }]),
  ) as Record<Side, SideFigures>;
  const p50 = (s: Side, k: 'total' | 'ttfb') => pct(times[s][k], 0.5);
  return {
    bytes: [...sizes][0] ?? 0,
    figures: {
      sides,
      totalRatio: p50('gateway', 'total') / p50('direct', 'total'),
      floorRatio: p50('floor', 'total') / p50('direct', 'total'),
      totalVsFloor: p50('gateway', 'total') / p50('floor', 'total'),
      ttfbDeltaMs: p50('gateway', 'ttfb') - p50('direct', 'ttfb'),
      floorTtfbDeltaMs: p50('floor', 'ttfb') - p50('direct', 'ttfb'),
    },
  };
}

export async function benchGatewayModel(
  options: { runs?: number; bytes?: number } = {},
): Promise<GatewayModelBench> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 100);
  const size = options.bytes ?? Number(process.env.BENCH_BYTES ?? 1_000_000);
  const load = loadavg()[0] ?? 0;
  const up = child<{ port: number }>('upstream', { BENCH_BYTES: String(size) });
  const children = [up.proc];
  try {
    const upstream = `http://127.0.0.1:${(await up.ready).port}`;
    const gw = child<GatewayInfo>('gateway', { BENCH_UPSTREAM: upstream });
    children.push(gw.proc);
    const { gateway, floor, token } = await gw.ready;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const scenarios = {} as Record<Scenario, ScenarioFigures>;
    let bytes = 0;
    for (const scenario of SCENARIOS) {
      const path = `/v1/messages?${scenario}`;
      const urls = { direct: upstream + path, floor: floor + path, gateway: `${gateway}/m/${token}${path}` };
      const m = await measure(agent, urls, token, runs);
      scenarios[scenario] = m.figures;
      bytes = m.bytes;
    }
    agent.destroy();
    gw.proc.send('rows?');
    const recorded = await new Promise<number>((ok) =>
      gw.proc.once('message', (m) => ok((m as { rows: number }).rows)),
    );
    return { bytes, runs, load, scenarios, rows: { recorded, expected: SCENARIOS.length * (runs + WARMUP) } };
  } finally {
    await Promise.all(children.map(stop));
  }
}

export function printGatewayModel(r: GatewayModelBench): void {
  const f = (n: number) => n.toFixed(2).padStart(9);
  const ms = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(2)} ms`;
  console.log(
    `model stream through the gateway: ${(r.bytes / 1e6).toFixed(2)} MB SSE answer, ${r.runs} runs per side after ${WARMUP} warm-up, rotating (load ${r.load.toFixed(2)} before)`,
  );
  const label: Record<Side, string> = {
    direct: 'anchor  direct  ',
    floor: 'anchor  floor   ',
    gateway: 'ours    gateway ',
  };
  for (const scenario of SCENARIOS) {
    const s = r.scenarios[scenario];
    console.log(`\n${scenario.padEnd(20)} total p50  total p90   TTFB p50   TTFB p90   (ms)`);
    for (const side of SIDES) {
      const x = s.sides[side];
      console.log(
        `${label[side]}   ${f(x.totalMs[0])}  ${f(x.totalMs[1])}  ${f(x.ttfbMs[0])}  ${f(x.ttfbMs[1])}`,
      );
    }
    console.log(
      `ratio   total p50 ${s.totalRatio.toFixed(3)}× direct (goal ≤ 1.1×); TTFB p50 ${ms(s.ttfbDeltaMs)} (goal ≤ +1 ms)`,
    );
    console.log(
      `        floor ${s.floorRatio.toFixed(3)}× direct, TTFB ${ms(s.floorTtfbDeltaMs)}; gateway ${s.totalVsFloor.toFixed(3)}× floor`,
    );
  }
  console.log(`complete wire rows: ${r.rows.recorded}/${r.rows.expected}`);
}

const role = process.env[ROLE_ENV];
if (role === 'upstream') serveUpstream(Number(process.env.BENCH_BYTES));
else if (role === 'gateway') void serveGateway(process.env.BENCH_UPSTREAM ?? '');
else if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  benchGatewayModel()
    .then(printGatewayModel)
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
