/**
 * The model proxy's cost on a streamed answer: a ~1 MB Anthropic-style SSE response through the
 * gateway's model handler (token swap, unbuffered relay, the wire meter reading usage) against the
 * anchor — the same request straight to the upstream — side by side in the same run.
 *
 *   node --import tsx bench/gateway-model.ts        (BENCH_RUNS=100 BENCH_BYTES=1000000)
 *
 * Three processes, as in production: the client (this one, standing for the engine), the gateway
 * (a child: an HTTP server mounting `createModelHandler`) and the upstream (a child: a local model
 * API). Two upstream behaviours: `burst` writes the whole answer as fast as the socket takes it
 * (throughput: worst case for a hop), `paced` writes one ~1 KB event per event-loop turn (each
 * event crosses the proxy as its own chunk, as a model's token stream does). A second anchor,
 * `floor`, is a bare node:http relay in the same gateway process (no swap, no meter): what any
 * Node proxy hop costs on this machine, so the handler's own share shows. Runs rotate the sides on
 * keep-alive connections, so drift and warm-up touch all alike. Goals: total ≤ 1.1× direct at p50,
 * time to first byte ≤ +1 ms at p50.
 */
import { type ChildProcess, fork } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';

const TOKEN = `tlg1_${'b'.repeat(43)}`;
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
  /** gateway / floor, total time at p50: the handler's own share. */
  totalVsFloor: number;
  /** gateway − direct, time to first byte at p50, in ms (goal ≤ 1). */
  ttfbDeltaMs: number;
}
export interface GatewayModelBench {
  bytes: number;
  runs: number;
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
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
}

// ---- the gateway child: the model handler under /m/<token>/, a bare relay under /floor/ ----

async function serveGateway(upstream: string): Promise<void> {
  const { createModelHandler } = await import('../src/gateway/models/model-proxy.js');
  const { nullLogger } = await import('../src/log/logger.js');
  let rows = 0;
  const ports = {
    logger: nullLogger,
    policyFor: () => ({}) as never,
    recordAct: () => {},
    recordUsage: (_s: unknown, u: { partial: boolean }) => {
      if (!u.partial) rows += 1;
    },
    modelRoute: () => ({
      api: 'anthropic' as const,
      upstream,
      credential: { value: 'sk-bench', kind: 'api-key' as const },
    }),
    overBudget: () => undefined,
    github: { gitUrl: '', apiUrl: '' },
  };
  const session = { id: 's', workItem: 'github:a/b#1', owner: 'a', repo: 'b', engine: 'claude', cwd: '/' };
  const handle = createModelHandler();
  const agent = new http.Agent({ keepAlive: true });
  const prefix = `/m/${TOKEN}`;
  const server = http.createServer((req, res) => {
    const url = req.url ?? '';
    if (url.startsWith(prefix)) {
      void handle(req, res, { session, path: url.slice(prefix.length), ports, token: TOKEN });
      return;
    }
    // The floor: the least a node:http relay does.
    const out = http.request(upstream + url.slice('/floor'.length), {
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
  process.on('message', () => process.send?.({ rows }));
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
}

// ---- the client: this process ----

function child(role: string, env: Record<string, string>): { proc: ChildProcess; port: Promise<number> } {
  const proc = fork(import.meta.filename, [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, ...env, [ROLE_ENV]: role },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const port = new Promise<number>((ok, fail) => {
    proc.once('message', (m) => ok((m as { port: number }).port));
    proc.once('exit', (code) => fail(new Error(`bench ${role} exited with ${code}`)));
  });
  return { proc, port };
}

const BODY = JSON.stringify({
  model: 'claude-bench',
  max_tokens: 32000,
  stream: true,
  messages: [{ role: 'user', content: 'go' }],
});

/** One request: time to the first body byte and to the end, in ms; the bytes received. */
function timeOne(agent: http.Agent, url: string): Promise<{ ttfb: number; total: number; bytes: number }> {
  return new Promise((ok, fail) => {
    const t0 = process.hrtime.bigint();
    let ttfb = 0;
    let bytes = 0;
    const headers = {
      'content-type': 'application/json',
      'x-api-key': TOKEN,
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
  runs: number,
): Promise<{ figures: ScenarioFigures; bytes: number }> {
  const times = Object.fromEntries(
    SIDES.map((s) => [s, { ttfb: [] as number[], total: [] as number[] }]),
  ) as Record<Side, { ttfb: number[]; total: number[] }>;
  const sizes = new Set<number>();
  for (let i = 0; i < WARMUP; i++) for (const side of SIDES) await timeOne(agent, urls[side]);
  for (let i = 0; i < runs; i++) {
    // Rotate which side goes first, so none always follows another.
    for (let k = 0; k < SIDES.length; k++) {
      const side = SIDES[(i + k) % SIDES.length] as Side;
      const t = await timeOne(agent, urls[side]);
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
      totalVsFloor: p50('gateway', 'total') / p50('floor', 'total'),
      ttfbDeltaMs: p50('gateway', 'ttfb') - p50('direct', 'ttfb'),
    },
  };
}

export async function benchGatewayModel(
  options: { runs?: number; bytes?: number; print?: boolean } = {},
): Promise<GatewayModelBench> {
  const runs = options.runs ?? Number(process.env.BENCH_RUNS ?? 100);
  const size = options.bytes ?? Number(process.env.BENCH_BYTES ?? 1_000_000);
  const up = child('upstream', { BENCH_BYTES: String(size) });
  const children = [up.proc];
  try {
    const upstream = `http://127.0.0.1:${await up.port}`;
    const gw = child('gateway', { BENCH_UPSTREAM: upstream });
    children.push(gw.proc);
    const gateway = `http://127.0.0.1:${await gw.port}`;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const scenarios = {} as Record<Scenario, ScenarioFigures>;
    let bytes = 0;
    for (const scenario of SCENARIOS) {
      const path = `/v1/messages?${scenario}`;
      const urls = {
        direct: upstream + path,
        floor: `${gateway}/floor${path}`,
        gateway: `${gateway}/m/${TOKEN}${path}`,
      };
      const m = await measure(agent, urls, runs);
      scenarios[scenario] = m.figures;
      bytes = m.bytes;
    }
    agent.destroy();
    gw.proc.send('rows?');
    const recorded = await new Promise<number>((ok) =>
      gw.proc.once('message', (m) => ok((m as { rows: number }).rows)),
    );
    const result = {
      bytes,
      runs,
      scenarios,
      rows: { recorded, expected: SCENARIOS.length * (runs + WARMUP) },
    };
    if (options.print !== false) print(result);
    return result;
  } finally {
    for (const c of children) c.kill('SIGTERM');
  }
}

function print(r: GatewayModelBench): void {
  const f = (n: number) => n.toFixed(2).padStart(9);
  console.log(
    `gateway model proxy: ${(r.bytes / 1e6).toFixed(2)} MB SSE answer, ${r.runs} runs per side, rotating (ms)`,
  );
  for (const scenario of SCENARIOS) {
    const s = r.scenarios[scenario];
    console.log(`\n${scenario.padEnd(20)} total p50  total p90   TTFB p50   TTFB p90`);
    const label: Record<Side, string> = {
      direct: 'anchor  direct  ',
      floor: 'anchor  floor   ',
      gateway: 'ours    gateway ',
    };
    for (const side of SIDES) {
      const x = s.sides[side];
      console.log(
        `${label[side]}   ${f(x.totalMs[0])}  ${f(x.totalMs[1])}  ${f(x.ttfbMs[0])}  ${f(x.ttfbMs[1])}`,
      );
    }
    const sign = s.ttfbDeltaMs >= 0 ? '+' : '';
    console.log(
      `ratio   total p50 ${s.totalRatio.toFixed(3)}× direct (goal ≤ 1.1×), ${s.totalVsFloor.toFixed(3)}× floor; TTFB p50 ${sign}${s.ttfbDeltaMs.toFixed(3)} ms (goal ≤ +1 ms)`,
    );
  }
  console.log(`\ncomplete wire rows: ${r.rows.recorded}/${r.rows.expected}`);
}

const role = process.env[ROLE_ENV];
if (role === 'upstream') serveUpstream(Number(process.env.BENCH_BYTES));
else if (role === 'gateway') void serveGateway(process.env.BENCH_UPSTREAM ?? '');
else if (process.argv[1] && resolve(process.argv[1]) === import.meta.filename) {
  benchGatewayModel().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
