/**
 * Part 1 of `npm run bench:console`: key echo latency. Every client is attached to the same tmux
 * session at once; the pane program answers each key with `\r<key>`. One sample: write one key
 * through a client, time until that client's output carries it back. Clients take turns, one key
 * at a time (the order rotating each round), a short idle gap between keys, warm-up rounds first.
 */
import * as pty from 'node-pty';
import { COLS, now, type Percentiles, percentiles, type Rig, sleep, until } from './console-rig.js';

export interface EchoClient {
  name: string;
  write(key: string): void;
  onOutput(fn: (text: string) => void): void;
  close(): void | Promise<void>;
}

/**
 * Keys whose letter no redraw sequence tmux sends for a one-cell change carries (h, l, m and the
 * capitals are left out: `CSI ?25h/l`, SGR `m`, `CSI H`), so a key seen in the output is its echo.
 */
const KEYS = 'abcdefgijknopqrsuvwxyz';

/** The floor: a bare node-pty `tmux attach-session -t =<name>` in this process. */
export function floorClient(rig: Rig): EchoClient {
  const [file, ...args] = rig.attachArgv();
  const term = pty.spawn(file as string, args, {
    name: 'xterm-256color',
    cols: COLS,
    rows: 48,
    cwd: rig.tmp,
    env: rig.env,
  });
  rig.onCleanup(() => term.kill());
  const listeners: Array<(text: string) => void> = [];
  term.onData((text) => {
    for (const fn of listeners) fn(text);
  });
  return {
    name: 'floor (node-pty tmux attach)',
    write: (key) => term.write(key),
    onOutput: (fn) => listeners.push(fn),
    close: () => term.kill(),
  };
}

interface Sample {
  /** Key written → its echo back. */
  total: number;
  /** Key written → the pane program read it. */
  in: number;
  /** The pane program read it → its echo back at the client. */
  out: number;
}

/** One client's pending sample: resolves when its output carries `key`. */
class Waiter {
  private pending: { key: string; start: number; resolve: (end: number) => void } | undefined;

  constructor(client: EchoClient) {
    client.onOutput((text) => {
      const p = this.pending;
      if (p && text.includes(p.key)) {
        this.pending = undefined;
        p.resolve(now());
      }
    });
  }

  async sample(client: EchoClient, key: string, arrivals: Map<string, number>): Promise<Sample> {
    arrivals.delete(key);
    const start = now();
    const end = await this.echo(client, key, start);
    // The pane's report comes on its own socket, sometimes after the echo: wait for it.
    await until(() => arrivals.has(key), `the pane's report of key ${JSON.stringify(key)}`, 5_000);
    const read = arrivals.get(key) as number;
    return { total: end - start, in: read - start, out: end - read };
  }

  private echo(client: EchoClient, key: string, start: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending = undefined;
        reject(new Error(`${client.name}: key ${JSON.stringify(key)} not echoed within 5 s`));
      }, 5_000);
      this.pending = {
        key,
        start,
        resolve: (end) => {
          clearTimeout(timer);
          resolve(end);
        },
      };
      client.write(key);
    });
  }
}

export interface EchoResult {
  name: string;
  stats: Percentiles;
  /** The way in (client → pane) and the way out (pane → client), each on its own. */
  in: Percentiles;
  out: Percentiles;
}

/** `rounds` measured rounds after `warmup` ones; each round one key per client, the order rotating. */
export async function measureEcho(
  clients: EchoClient[],
  arrivals: Map<string, number>,
  options: { rounds: number; warmup: number; gapMs: number },
): Promise<EchoResult[]> {
  const waiters = clients.map((c) => new Waiter(c));
  const samples = clients.map(() => [] as Sample[]);
  let k = 0;
  for (let round = 0; round < options.warmup + options.rounds; round++) {
    for (let i = 0; i < clients.length; i++) {
      const at = (i + round) % clients.length;
      const client = clients[at] as EchoClient;
      const key = KEYS[k++ % KEYS.length] as string;
      const sample = await (waiters[at] as Waiter).sample(client, key, arrivals);
      if (round >= options.warmup) samples[at]?.push(sample);
      // Let the echo reach every other attached client before the next key.
      await sleep(options.gapMs);
    }
  }
  return clients.map((c, i) => {
    const xs = samples[i] ?? [];
    return {
      name: c.name,
      stats: percentiles(xs.map((x) => x.total)),
      in: percentiles(xs.map((x) => x.in)),
      out: percentiles(xs.map((x) => x.out)),
    };
  });
}
