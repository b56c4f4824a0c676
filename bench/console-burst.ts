/**
 * Part 3 of `npm run bench:console`: a stalled viewer must not slow the agent. The pane prints a
 * burst (base64 of 15 MB of random bytes: 20 MB of text) and times its own writes to its tty from
 * inside (process.hrtime around synchronous tty writes: the burst is done when tmux has read it
 * all). Scenarios alternate run by run (the order rotating), after a warm-up run of each:
 *   no viewer         nothing attached but the bench's own clients of other parts (none: they are
 *                     closed before this part);
 *   stalled viewer    a console viewer that connects, then never acks and stops reading its socket
 *                     for 3 s (the burst runs inside those 3 s), then closes;
 * and, for reference, a bare `tmux attach -r` pty that is paused (never read) the same way, and one
 * that reads everything (what tmux spends on any attached client).
 */
import { randomBytes } from 'node:crypto';
import * as pty from 'node-pty';
import {
  type BurstResult,
  COLS,
  type Percentiles,
  percentiles,
  type Rig,
  ROWS,
  sleep,
} from './console-rig.js';

export const BURST_BYTES = Number(process.env.BENCH_CONSOLE_BURST_BYTES ?? 15_000_000);
export const STALL_MS = 3_000;

export interface Scenario {
  name: string;
  /** Set up the viewer (if any); returns its teardown, run after the burst and the stall. */
  setup(): Promise<() => Promise<void>>;
  /** A line about what the viewer saw, after the runs. */
  report?(): string;
}

export const noViewer: Scenario = {
  name: 'no viewer',
  setup: async () => async () => {},
};

/**
 * A bare read-only tmux attach on a pty (no flow control of ours): `stalled`, its pty is never read
 * for 3 s; else it reads everything as fast as tmux writes (what any attached client costs tmux).
 */
export function barePty(rig: Rig, stalled: boolean): Scenario {
  return {
    name: stalled
      ? 'stalled bare tmux attach -r pty (reference)'
      : 'reading bare tmux attach -r pty (reference)',
    setup: async () => {
      const [file, ...args] = rig.attachArgv(['-r']);
      const term = pty.spawn(file as string, args, {
        name: 'xterm-256color',
        cols: COLS,
        rows: ROWS,
        cwd: rig.tmp,
        env: rig.env,
      });
      let seen = 0;
      term.onData((d) => {
        seen += d.length;
      });
      const start = Date.now();
      while (seen === 0 && Date.now() - start < 5_000) await sleep(5);
      if (stalled) term.pause();
      const started = Date.now();
      return async () => {
        await sleep(Math.max(0, STALL_MS - (Date.now() - started)));
        term.resume();
        term.kill();
      };
    },
  };
}

export interface BurstFigures {
  name: string;
  ms: number[];
  stats: Percentiles;
  bytes: number;
}

async function runOnce(rig: Rig, scenario: Scenario): Promise<BurstResult> {
  const teardown = await scenario.setup();
  try {
    return await rig.burst(BURST_BYTES, `BURST-END-${randomBytes(6).toString('hex')}`);
  } finally {
    await teardown();
    rig.clear();
    // Let tmux finish redrawing whatever is still attached before the next run.
    await sleep(300);
  }
}

export async function measureBursts(rig: Rig, scenarios: Scenario[], reps: number): Promise<BurstFigures[]> {
  const ms = scenarios.map(() => [] as number[]);
  let bytes = 0;
  for (const scenario of scenarios) await runOnce(rig, scenario);
  for (let rep = 0; rep < reps; rep++) {
    for (let i = 0; i < scenarios.length; i++) {
      const at = (i + rep) % scenarios.length;
      const result = await runOnce(rig, scenarios[at] as Scenario);
      bytes = result.bytes;
      ms[at]?.push(result.ms);
    }
  }
  return scenarios.map((s, i) => ({ name: s.name, ms: ms[i] ?? [], stats: percentiles(ms[i] ?? []), bytes }));
}
