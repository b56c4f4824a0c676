import type { TurnEvent } from '../engines/protocols/types.js';
import type { App } from '../main.js';
import type { SessionRecord } from '../sessions/types.js';
import { formatCost, formatDuration, formatTokens, oneLine, turnDurationMs } from './format.js';
import { EXIT, type Io } from './io.js';

export interface RunOptions {
  engine?: string;
  cwd?: string;
  runner?: string;
  json?: boolean;
}

/** Readable progress for one event; untrusted text is flattened to one safe line. */
export function describeEvent(event: TurnEvent): string | null {
  switch (event.type) {
    case 'session':
      return null;
    case 'text':
      return event.text.trim() ? `  │ ${oneLine(event.text, 400)}` : null;
    case 'tool-use':
      return `  ⚙ ${oneLine(event.name, 60)} ${oneLine(JSON.stringify(event.input ?? null), 200)}`;
    case 'tool-result':
      return `  ${event.ok ? '✓' : '✗'} ${oneLine(event.summary, 200) || '(no output)'}`;
    case 'usage':
      return null;
    case 'turn-end':
      return null;
    case 'error':
      return `  ! engine error: ${oneLine(event.message, 400)}`;
    case 'diagnostic':
      return `  ? ${oneLine(event.message, 300)}`;
  }
}

/** `the-loop run <work-item> <prompt>`: one turn through the session machinery. */
export async function runCommand(
  app: App,
  io: Io,
  workItem: string,
  prompt: string,
  options: RunOptions,
): Promise<number> {
  const controller = new AbortController();
  const onSignal = () => {
    io.err('the-loop: cancelling the turn (the engine is being stopped)…\n');
    controller.abort();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  const started = Date.now();
  try {
    const result = await app.turns.runTurn({
      workItem,
      prompt,
      engine: options.engine,
      cwd: options.cwd,
      runner: options.runner,
      signal: controller.signal,
      onSession: (session: SessionRecord, created: boolean) => {
        if (options.json) {
          io.out(`${JSON.stringify({ type: 'session', created, session })}\n`);
        } else {
          const what = created ? 'new session' : 'session';
          const credential = session.credentialKind
            ? `${session.credentialKind} (${session.credentialEnv})`
            : 'no credential set';
          io.out(
            `▸ ${session.workItem} · ${what} ${session.id.slice(0, 8)} · ${session.engine} on ${session.runner} · ${credential}\n`,
          );
          io.out(`  cwd ${session.cwd}\n`);
        }
      },
      onEvent: (event) => {
        if (options.json) {
          io.out(`${JSON.stringify({ type: 'event', event })}\n`);
          return;
        }
        const line = describeEvent(event);
        if (line) io.out(`${line}\n`);
      },
    });
    const { turn } = result;
    if (options.json) {
      io.out(`${JSON.stringify({ type: 'turn', turn })}\n`);
    } else {
      const took = formatDuration(turnDurationMs(turn) ?? Date.now() - started);
      const mark = turn.status === 'succeeded' ? '✔' : '✖';
      io.out(
        `${mark} turn ${turn.seq} ${turn.status} · ended by ${turn.endReason} · ${took} · ${formatTokens(turn.usage)} · ${formatCost(turn)}\n`,
      );
      if (turn.error) io.out(`  error: ${oneLine(turn.error, 1000)}\n`);
    }
    return turn.status === 'succeeded' ? EXIT.ok : EXIT.failed;
  } finally {
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}
