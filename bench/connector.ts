/**
 * `run_command` of the terminal connector against its floor, side by side in one run:
 *
 *   npm run bench:connector   (BENCH_CONNECTOR_RUNS, default 50, after BENCH_CONNECTOR_WARMUP, default 5;
 *                              BENCH_CONNECTOR_PROFILE calls traced afterwards, default 5)
 *
 *   connector  `run_command {command: "true"}` through the real `the-loop mcp` server, a child process
 *              spoken to by the MCP SDK's own client over stdio (callTool → result), exactly as
 *              Claude Code would; the new pane's real exit status and output come back.
 *   floor      what that costs with nothing but tmux: one `sh -c` per run doing three bare tmux
 *              commands — create a pane that runs the command and then signals a channel, wait on
 *              the channel, read the pane's output (and remove the pane, in the same tmux call).
 *
 * Both on the same private tmux server (`tmux -L bench-connector-<pid>`), interleaved run by run
 * (which goes first alternates). Goal: connector ≤ 1.5× floor at p50. A call that fails or times
 * out is counted, printed and left out of the figures. Afterwards a few calls run
 * through a second server whose `tmux` is a logging wrapper: how many tmux processes one call starts
 * and where its time goes. The machine's load skews every figure: it is printed with them. Figures
 * are printed, never asserted. At the end: the server children (SDK close, then by PID), our tmux
 * server (kill-server on our socket only), the temp dir.
 */
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { stringify } from 'yaml';

const ROOT = join(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin/the-loop.js');
const RUNS = Number(process.env.BENCH_CONNECTOR_RUNS ?? 50);
const WARMUP = Number(process.env.BENCH_CONNECTOR_WARMUP ?? 5);
const PROFILE = Number(process.env.BENCH_CONNECTOR_PROFILE ?? 5);
const SOCKET = `bench-connector-${process.pid}`;
const SESSION = 'bench';
const TIMEOUT_S = 3;

const now = () => performance.timeOrigin + performance.now();
const fmt = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
const load = () =>
  loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

interface Figures {
  p50: number;
  p90: number;
  mean: number;
  n: number;
}

function figures(ms: number[]): Figures {
  const s = [...ms].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? Number.NaN;
  return { p50: at(0.5), p90: at(0.9), mean: s.reduce((a, b) => a + b, 0) / s.length, n: s.length };
}

const line = (name: string, f: Figures) =>
  `  ${name.padEnd(10)} p50 ${fmt(f.p50).padStart(7)}  p90 ${fmt(f.p90).padStart(7)}  mean ${fmt(f.mean).padStart(7)} ms  n ${f.n}`;

const tmuxEnv = () => ({ PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LANG: 'C.UTF-8' });

function tmux(...args: string[]): string {
  return execFileSync('tmux', ['-L', SOCKET, ...args], { env: tmuxEnv(), encoding: 'utf8' });
}

/** The floor: three tmux commands from one shell (the channel is unique to that shell's PID). */
const FLOOR_SCRIPT = [
  `p=$(tmux -L ${SOCKET} new-window -d -P -F '#{pane_id}' -t '=${SESSION}:' "true; tmux -L ${SOCKET} wait-for -S ch$$")`,
  `tmux -L ${SOCKET} wait-for ch$$`,
  `tmux -L ${SOCKET} capture-pane -p -t "$p" \\; kill-pane -t "$p"`,
].join(' && ');

function floorOnce(): Promise<number> {
  const t0 = now();
  return new Promise((resolve, reject) => {
    execFile('sh', ['-c', FLOOR_SCRIPT], { env: tmuxEnv(), timeout: TIMEOUT_S * 1000 }, (error) =>
      error ? reject(error) : resolve(now() - t0),
    );
  });
}

interface Server {
  client: Client;
  pid: number | null;
  close(): Promise<void>;
}

async function startServer(cwd: string, path: string): Promise<Server> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', '--operator', 'bench'],
    cwd,
    env: { ...tmuxEnv(), PATH: path },
    stderr: 'ignore',
  });
  const client = new Client({ name: 'bench-connector', version: '1.0.0' });
  await client.connect(transport);
  const pid = transport.pid;
  return {
    client,
    pid,
    close: async () => {
      await client.close();
      if (pid !== null) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}

type Run = { ms: number; ok: true } | { ms: number; ok: false; why: string };

async function connectorOnce(client: Client): Promise<Run> {
  const t0 = now();
  const r = (await client.callTool({
    name: 'run_command',
    arguments: { target: SESSION, command: 'true', timeoutSeconds: TIMEOUT_S },
  })) as {
    isError?: boolean;
    content: Array<{ text?: string }>;
    structuredContent?: { exitStatus?: number };
  };
  const ms = now() - t0;
  if (r.isError || r.structuredContent?.exitStatus !== 0)
    return { ms, ok: false, why: (r.content[0]?.text ?? '').split('\n')[0] ?? '' };
  return { ms, ok: true };
}

async function measure(client: Client) {
  const floor: number[] = [];
  const connector: number[] = [];
  const failed: string[] = [];
  for (let i = 0; i < WARMUP + RUNS; i++) {
    const measured = i >= WARMUP;
    const one = async () => {
      const run = await connectorOnce(client);
      if (!run.ok) failed.push(`run ${i + 1}: ${run.why} (${fmt(run.ms)} ms)`);
      else if (measured) connector.push(run.ms);
    };
    const two = async () => {
      const ms = await floorOnce();
      if (measured) floor.push(ms);
    };
    if (i % 2 === 0) {
      await one();
      await two();
    } else {
      await two();
      await one();
    }
  }
  return { floor, connector, failed };
}

/** A `tmux` on PATH that logs when each call started and ended (ns), then the real one. */
function tracingTmux(dir: string, log: string): string {
  const real = execFileSync('sh', ['-c', 'command -v tmux'], { encoding: 'utf8' }).trim();
  const bin = join(dir, 'trace-bin');
  mkdirSync(bin);
  writeFileSync(
    join(bin, 'tmux'),
    [
      '#!/bin/sh',
      's=$(date +%s%N)',
      // The waiter is killed by PID: exec, so the kill reaches tmux itself.
      `if [ "$3" = wait-for ]; then echo "$s - $3" >> '${log}'; exec '${real}' "$@"; fi`,
      `'${real}' "$@"; r=$?`,
      `echo "$s $(date +%s%N) $3" >> '${log}'`,
      'exit $r',
      '',
    ].join('\n'),
  );
  chmodSync(join(bin, 'tmux'), 0o755);
  return `${bin}:${process.env.PATH ?? ''}`;
}

async function profile(dir: string): Promise<void> {
  const log = join(dir, 'tmux-calls.log');
  writeFileSync(log, '');
  const server = await startServer(dir, tracingTmux(dir, log));
  try {
    await connectorOnce(server.client);
    console.log(
      `\nwhere one call goes (${PROFILE} calls; every tmux call through a logging wrapper, which adds its own ~1–2 ms each)`,
    );
    for (let i = 0; i < PROFILE; i++) {
      writeFileSync(log, '');
      const t0 = now();
      const run = await connectorOnce(server.client);
      const calls = readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => {
          const [s, e, cmd] = l.split(' ');
          return {
            start: Number(s) / 1e6 - t0,
            end: e === '-' ? null : Number(e) / 1e6 - t0,
            cmd: cmd ?? '?',
          };
        })
        .sort((a, b) => a.start - b.start);
      const spans = calls.map((c) =>
        c.end === null
          ? `${c.cmd}@${c.start.toFixed(1)}`
          : `${c.cmd} ${c.start.toFixed(1)}→${c.end.toFixed(1)}`,
      );
      const inTmux = calls.reduce((n, c) => n + (c.end === null ? 0 : c.end - c.start), 0);
      console.log(
        `  call ${i + 1}: ${fmt(run.ms)} ms${run.ok ? '' : ' (failed)'}, ${calls.length} tmux processes, ${fmt(inTmux)} ms inside them (excl. the waiter)`,
      );
      console.log(`    ${spans.join(' | ')}`);
    }
  } finally {
    await server.close();
  }
}

async function run(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-connector-'));
  let server: Server | null = null;
  try {
    execFileSync('tmux', ['-L', SOCKET, 'new-session', '-d', '-s', SESSION, '-x', '120', '-y', '30', 'sh'], {
      env: tmuxEnv(),
    });
    // The floor's pane stays (dead) after its command until it is read and removed.
    tmux('set-option', '-g', '-w', 'remain-on-exit', 'on');
    mkdirSync(join(dir, '.the-loop'));
    writeFileSync(
      join(dir, '.the-loop/config.yaml'),
      stringify({
        dataDir: 'data',
        tmux: { socket: SOCKET },
        connector: { operators: { bench: { scope: 'write', targets: { single: SESSION } } } },
      }),
    );
    console.log(
      `connector bench: ${cpus().length} CPUs, load average ${load()} before the run; node ${process.version}; ${execFileSync('tmux', ['-V'], { encoding: 'utf8' }).trim()}`,
    );
    server = await startServer(dir, process.env.PATH ?? '');
    const { floor, connector, failed } = await measure(server.client);
    const f = figures(floor);
    const c = figures(connector);
    console.log(`\nrun_command "true", round trip (${WARMUP} warmup + ${RUNS} measured each, interleaved)`);
    console.log(line('floor', f));
    console.log(line('connector', c));
    console.log(
      `  ratio      p50 ${fmt(c.p50 / f.p50)}×  p90 ${fmt(c.p90 / f.p90)}×  mean ${fmt(c.mean / f.mean)}×   (goal ≤ 1.5× at p50: ${c.p50 / f.p50 <= 1.5 ? 'met' : 'NOT met'})`,
    );
    console.log(`  load average after: ${load()}`);
    if (failed.length > 0) {
      console.log(`  ${failed.length} connector call(s) failed or timed out and are left out:`);
      for (const why of failed) console.log(`    ${why}`);
    }
    await server.close();
    server = null;
    if (PROFILE > 0) await profile(dir);
  } finally {
    await server?.close();
    try {
      tmux('kill-server');
    } catch {
      // no server left on our socket
    }
    const uid = process.getuid?.() ?? 0;
    rmSync(join(process.env.TMUX_TMPDIR ?? '/tmp', `tmux-${uid}`, SOCKET), { force: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

run().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
