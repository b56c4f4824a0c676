/**
 * The browser console against the floor (a bare tmux attach) and its peer (wetty 3.2.0), side by
 * side in one run:
 *
 *   npm run bench:console   (BENCH_CONSOLE_KEYS per client, default 1000, after BENCH_CONSOLE_WARMUP, default 50;
 *                            BENCH_CONSOLE_MB, default 8, and BENCH_CONSOLE_PAGES runs per page, default 5, for part 2;
 *                            BENCH_CONSOLE_BURSTS runs per scenario, default 7, for part 3;
 *                            BENCH_CONSOLE_PARTS, default 1,2,3)
 *
 * The console is the real one, in this process (console-server.ts): the console server with its
 * login link → cookie and login key, key-signed tickets, Origin checks, and the terminal hub, on a private tmux server
 * (`tmux -L bench-console-<pid>`) whose one session's pane runs a small echo/burst program
 * (console-rig.ts). wetty 3.2.0 is installed on demand into bench/.out/wetty and runs as a child
 * process with its command set to the attach of the same session (console-wetty.ts).
 *
 * 1. Key echo latency (console-echo.ts): floor = node-pty `tmux attach`; console = a writer's
 *    WebSocket (logged in, taken over); wetty = its socket.io protocol. All three attached at once,
 *    one key at a time in turn. Goals: console p50 ≤ 1.5× floor; console faster than wetty at p50
 *    and p99.
 * 2. Output throughput to headless Chromium (console-browser.ts): the console's session page vs
 *    wetty's page, one at a time, while the pane prints base64 of N MiB; time until the end marker
 *    is on the page's terminal. Goal: console ≥ 1× wetty (wetty's time / the console's).
 * 3. A 20 MB burst in the pane with no viewer vs with a console viewer stalled for 3 s
 *    (console-burst.ts), timed inside the pane. Goal ≤ 1.1×.
 * At the end: every child by PID, the hub's ptys, our tmux server (kill-server on our socket only),
 * the temp dir. The machine's load skews every figure: the load average is printed with them.
 */
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { measureThroughput, NO_WEBGL, wettyTarget } from './console-browser.js';
import { barePty, measureBursts, noViewer } from './console-burst.js';
import { consoleEchoClient, type Login, login, stalledConsoleViewer } from './console-client.js';
import { type EchoClient, type EchoResult, floorClient, measureEcho } from './console-echo.js';
import { describe, fmt, Rig, sleep } from './console-rig.js';
import {
  type BenchConsole,
  consoleTarget,
  frontEnd,
  startBenchConsole,
  writerLogin,
} from './console-server.js';
import { installWetty, startWetty, WETTY_VERSION, type Wetty, wettyClient } from './console-wetty.js';

const ROOT = join(import.meta.dirname, '..');
const OUT = join(ROOT, 'bench', '.out');
const KEYS = Number(process.env.BENCH_CONSOLE_KEYS ?? 1000);
const WARMUP = Number(process.env.BENCH_CONSOLE_WARMUP ?? 50);
const BURSTS = Number(process.env.BENCH_CONSOLE_BURSTS ?? 7);
const MB = Number(process.env.BENCH_CONSOLE_MB ?? 8);
const PAGES = Number(process.env.BENCH_CONSOLE_PAGES ?? 5);
/** Which parts to run (default all): e.g. BENCH_CONSOLE_PARTS=1,3 */
const PARTS = new Set((process.env.BENCH_CONSOLE_PARTS ?? '1,2,3').split(',').map((p) => p.trim()));

interface Goal {
  what: string;
  figure: string;
  pass: boolean;
}

const ratio = (a: number, b: number) => `${fmt(a / b)}×`;

async function partEcho(rig: Rig, console_: BenchConsole, wetty: Wetty, goals: Goal[]): Promise<void> {
  const floor = floorClient(rig);
  const writer = await consoleEchoClient(console_.endpoint, await writerLogin(console_.endpoint));
  const peer: EchoClient = { name: `wetty ${WETTY_VERSION} (socket.io)`, ...(await wettyClient(wetty)) };
  // Every client has drawn the screen before the first key.
  await sleep(500);
  let results: EchoResult[];
  try {
    results = await measureEcho([floor, writer, peer], rig.arrivals, {
      rounds: KEYS,
      warmup: WARMUP,
      gapMs: 5,
    });
  } finally {
    await floor.close();
    await writer.close();
    await peer.close();
  }
  const [f, c, w] = results as [EchoResult, EchoResult, EchoResult];
  console.log(
    '\n1. key echo latency: one key written → its echo back at the same client (all three attached)',
  );
  for (const r of results) console.log(`   ${r.name.padEnd(36)} ${describe(r.stats)}`);
  console.log(
    '   split at the pane program reading the key (same monotonic clock): in = client → pane, out = pane → client',
  );
  for (const r of results)
    console.log(
      `   ${r.name.padEnd(36)} in  p50 ${fmt(r.in.p50)}  p99 ${fmt(r.in.p99)}   out  p50 ${fmt(r.out.p50)}  p99 ${fmt(r.out.p99)} ms`,
    );
  console.log(
    `   console / floor: p50 ${ratio(c.stats.p50, f.stats.p50)}  p99 ${ratio(c.stats.p99, f.stats.p99)}`,
  );
  console.log(
    `   console / wetty: p50 ${ratio(c.stats.p50, w.stats.p50)}  p99 ${ratio(c.stats.p99, w.stats.p99)}`,
  );
  console.log(
    `   wetty / floor:   p50 ${ratio(w.stats.p50, f.stats.p50)}  p99 ${ratio(w.stats.p99, f.stats.p99)}`,
  );
  goals.push(
    {
      what: 'echo: console p50 ≤ 1.5× floor',
      figure: `${fmt(c.stats.p50)} / ${fmt(f.stats.p50)} ms = ${ratio(c.stats.p50, f.stats.p50)}`,
      pass: c.stats.p50 <= 1.5 * f.stats.p50,
    },
    {
      what: 'echo: console faster than wetty at p50',
      figure: `${fmt(c.stats.p50)} vs ${fmt(w.stats.p50)} ms`,
      pass: c.stats.p50 < w.stats.p50,
    },
    {
      what: 'echo: console faster than wetty at p99',
      figure: `${fmt(c.stats.p99)} vs ${fmt(w.stats.p99)} ms`,
      pass: c.stats.p99 < w.stats.p99,
    },
  );
}

async function partThroughput(rig: Rig, console_: BenchConsole, wetty: Wetty, goals: Goal[]): Promise<void> {
  const figures = await measureThroughput(
    rig,
    [
      consoleTarget(console_.endpoint, 'console session page'),
      wettyTarget(wetty.url, `wetty ${WETTY_VERSION} page`),
      wettyTarget(wetty.url, `wetty page, WebGL off (reference)`, NO_WEBGL),
    ],
    { bytes: MB * 1024 * 1024, reps: PAGES },
  );
  const [c, w, wDom] = figures;
  if (!c || !w || !wDom) throw new Error('part 2 measured nothing');
  console.log(
    `\n2. output to headless Chromium: base64 of ${MB} MiB (${fmt(c.bytes / 1e6, 1)} MB of text), until the end marker is on screen`,
  );
  for (const f of figures)
    console.log(
      `   ${f.name.padEnd(36)} ${describe(f.stats)}   ${fmt(f.mbps)} MB/s (${f.renderer} renderer)`,
    );
  console.log(
    `   console throughput / wetty's: ${ratio(w.stats.p50, c.stats.p50)}; / wetty's with WebGL off: ${ratio(wDom.stats.p50, c.stats.p50)} (p50 times)`,
  );
  goals.push(
    {
      what: 'browser: console throughput ≥ 1× wetty',
      figure: `${fmt(c.mbps)} vs ${fmt(w.mbps)} MB/s = ${ratio(w.stats.p50, c.stats.p50)}`,
      pass: c.stats.p50 <= w.stats.p50,
    },
    {
      what: 'browser: … ≥ 1× wetty with WebGL off (reference)',
      figure: `${fmt(c.mbps)} vs ${fmt(wDom.mbps)} MB/s = ${ratio(wDom.stats.p50, c.stats.p50)}`,
      pass: c.stats.p50 <= wDom.stats.p50,
    },
  );
}

async function partBurst(rig: Rig, console_: BenchConsole, goals: Goal[]): Promise<void> {
  const viewer: Login = await login(console_.endpoint);
  const stalledViewer = stalledConsoleViewer(
    console_.endpoint,
    () => viewer,
    () => console_.hub.stats(),
  );
  const figures = await measureBursts(
    rig,
    [noViewer, stalledViewer, barePty(rig, true), barePty(rig, false)],
    BURSTS,
  );
  const [none, stalled] = figures;
  if (!none || !stalled) throw new Error('part 3 measured nothing');
  console.log(`\n3. burst of ${fmt((none.bytes ?? 0) / 1e6, 1)} MB in the pane, timed inside the pane`);
  for (const f of figures)
    console.log(
      `   ${f.name.padEnd(48)} ${describe(f.stats)}   ${ratio(f.stats.p50, none.stats.p50)} no viewer`,
    );
  console.log(`   ${stalledViewer.report?.()}`);
  goals.push({
    what: 'burst: stalled console viewer ≤ 1.1× no viewer',
    figure: `${fmt(stalled.stats.p50, 0)} / ${fmt(none.stats.p50, 0)} ms = ${ratio(stalled.stats.p50, none.stats.p50)}`,
    pass: stalled.stats.p50 <= 1.1 * none.stats.p50,
  });
}

function summary(goals: Goal[]): void {
  console.log('\nsummary (medians)');
  for (const g of goals) console.log(`   ${g.pass ? 'PASS' : 'FAIL'}  ${g.what.padEnd(48)} ${g.figure}`);
}

async function main(): Promise<void> {
  const load = loadavg()[0] ?? 0;
  const wettyDir = installWetty(OUT);
  const staticDir = await frontEnd(OUT);
  const rig = new Rig();
  const onSignal = () => {
    rig.cleanupSync();
    process.exit(130);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const goals: Goal[] = [];
  try {
    await rig.start();
    const bench = await startBenchConsole(rig, staticDir);
    const wetty = await startWetty(rig, wettyDir);
    console.log(
      `tmux -L ${rig.socketName} (${rig.tmux(['-V']).trim()}); console ${bench.server.origin}; wetty ${wetty.url}; ` +
        `${cpus().length} CPUs, load average ${load.toFixed(1)} before the run; node ${process.version}`,
    );
    if (PARTS.has('1')) await partEcho(rig, bench, wetty, goals);
    if (PARTS.has('2')) await partThroughput(rig, bench, wetty, goals);
    if (PARTS.has('3')) await partBurst(rig, bench, goals);
    summary(goals);
    console.log(`load average ${(loadavg()[0] ?? 0).toFixed(1)} after the run`);
  } finally {
    await rig.cleanup();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

await main();
