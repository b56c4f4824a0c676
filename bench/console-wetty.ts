/**
 * The peer of `npm run bench:console`: wetty 3.2.0, installed on demand into bench/.out/wetty (npm,
 * as bench/scan.ts installs ccusage), run as a child process on a free loopback port with its
 * `--command` set to the attach of the bench's tmux session. wetty runs a command itself (rather
 * than `ssh localhost`) only when it runs as root with its ssh host on loopback (its
 * server/command.js); it spawns `/usr/bin/env -S <command>` on a node-pty, so the command is
 * whitespace-split words, no shell. Driven with socket.io-client from wetty's own node_modules:
 * `input` events carry keys, `data` events carry output (coalesced by wetty for 2 ms), `commit`
 * acknowledges output every 256 KiB as wetty's page does.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { COLS, type Rig, ROWS, until } from './console-rig.js';

export const WETTY_VERSION = '3.2.0';

export function installWetty(out: string): string {
  const dir = join(out, 'wetty');
  const main = join(dir, 'node_modules', 'wetty', 'build', 'main.js');
  const pkg = join(dir, 'node_modules', 'wetty', 'package.json');
  const installed = existsSync(pkg) && JSON.parse(readFileSync(pkg, 'utf8')).version === WETTY_VERSION;
  if (!installed) {
    console.log(`installing wetty@${WETTY_VERSION} into ${dir} …`);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'package.json'), '{"private":true}');
    execFileSync(
      'npm',
      ['install', '--no-audit', '--no-fund', '--loglevel=error', `wetty@${WETTY_VERSION}`],
      {
        cwd: dir,
        stdio: 'inherit',
      },
    );
  }
  if (!existsSync(main)) throw new Error(`wetty's main.js is missing after the install: ${main}`);
  return dir;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface Wetty {
  url: string;
  dir: string;
}

/** Start wetty on a free port, its command the attach of the bench session; resolves once it listens. */
export async function startWetty(rig: Rig, dir: string): Promise<Wetty> {
  if (process.getuid?.() !== 0)
    throw new Error(
      'wetty runs a local command only as root (else it runs `ssh localhost`): run the bench as root',
    );
  const port = await freePort();
  const main = join(dir, 'node_modules', 'wetty', 'build', 'main.js');
  const child = rig.spawnChild(
    [
      process.execPath,
      main,
      '--host',
      '127.0.0.1',
      '--port',
      String(port),
      '--command',
      rig.attachArgv().join(' '),
      '--log-level',
      'warn',
    ],
    // wetty gives its pty its own environment: the tmux client's one, plus NODE_ENV.
    { env: { ...rig.env, NODE_ENV: 'production' }, cwd: dir },
  );
  let output = '';
  child.stdout?.on('data', (d: Buffer) => {
    output += d.toString();
  });
  child.stderr?.on('data', (d: Buffer) => {
    output += d.toString();
  });
  const url = `http://127.0.0.1:${port}`;
  let up = false;
  const probe = setInterval(() => {
    fetch(`${url}/`)
      .then((r) => {
        up ||= r.ok;
      })
      .catch(() => {});
  }, 50);
  try {
    await until(() => up || child.exitCode !== null, 'wetty to listen', 20_000);
  } finally {
    clearInterval(probe);
  }
  if (!up) throw new Error(`wetty exited (${child.exitCode}): ${output.slice(-2000)}`);
  return { url, dir };
}

/** The part of socket.io-client's Socket the bench uses (wetty's copy has no types here). */
interface IoSocket {
  on(event: string, fn: (...args: unknown[]) => void): IoSocket;
  emit(event: string, ...args: unknown[]): IoSocket;
  close(): void;
  connected: boolean;
}

export interface WettyClient {
  write(key: string): void;
  onOutput(fn: (text: string) => void): void;
  close(): void;
}

/** A socket.io client as wetty's page is one: keys out as `input`, output in as `data`, commits every 256 KiB. */
export async function wettyClient(wetty: Wetty): Promise<WettyClient> {
  const require = createRequire(join(wetty.dir, 'package.json'));
  const { io } = require('socket.io-client') as {
    io: (url: string, options: Record<string, unknown>) => IoSocket;
  };
  const socket = io(wetty.url, { path: '/socket.io', transports: ['websocket'], reconnection: false });
  const listeners: Array<(text: string) => void> = [];
  let counter = 0;
  let loggedIn = false;
  socket.on('login', () => {
    loggedIn = true;
    socket.emit('resize', { cols: COLS, rows: ROWS });
  });
  socket.on('data', (data: unknown) => {
    const text = String(data);
    for (const fn of listeners) fn(text);
    counter += text.length;
    while (counter >= 262_144) {
      counter -= 262_144;
      socket.emit('commit', 262_144);
    }
  });
  await until(() => loggedIn, 'wetty to spawn its pty (login event)', 15_000);
  return {
    write: (key) => socket.emit('input', key),
    onOutput: (fn) => listeners.push(fn),
    close: () => socket.close(),
  };
}
