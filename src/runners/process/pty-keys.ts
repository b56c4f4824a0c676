import { dirname } from 'node:path';
import { LoopError } from '../../core/errors.js';
import type { TurnEvent } from '../../core/events.js';
import type { EnginePreset } from '../../engines/preset.js';
import { ensureRuntimeDir, privateDirProblem, removeIfEmpty, runtimeDirOf } from '../../os/runtime-dir.js';
import { NAMED_KEY, planKeys, type SentKey } from '../keys.js';
import type { EngineProcess } from './engine-process.js';
import { type KeysServer, keysSocketPath, requestKeys, serveKeys, socketPathProblem } from './keys-socket.js';

/**
 * Keys for the PTY turns of the process runner: the server side (a turn listens on its keys socket)
 * and the client side (`the-loop sessions keys`). Both find the socket the same way, from the data
 * dir and the session's slug (`keysSocketPath` in the data dir's runtime directory).
 */
export interface PtyKeysContext {
  /** The data dir whose sessions' keys sockets are served and reached. */
  dataDir: string;
  /** The environment the runtime directory is found from (TMPDIR). */
  env: Readonly<Record<string, string | undefined>>;
  /** A session's status in the registry (undefined: unknown); keys reach an `active` one only. */
  sessionStatus?: ((sessionId: string) => Promise<string | undefined>) | undefined;
}

/**
 * Pause after a bare Escape that more keys follow. A terminal program reads an ESC with more bytes
 * right behind it as the start of a sequence (Meta+key, an arrow): Ink-based TUIs split by read, Node's
 * readline waits for more. tmux send-keys has the same problem; a short gap avoids it.
 */
const ESCAPE_GAP_MS = 50;

/** Write the keys of one request into the engine's terminal, in order. */
async function pressKeys(
  engine: EngineProcess | undefined,
  keys: readonly { bytes: string }[],
): Promise<void> {
  if (!engine?.write) throw new Error('the engine has not started yet');
  for (const [i, key] of keys.entries()) {
    try {
      await engine.write(key.bytes);
    } catch (error) {
      throw new Error(
        `${error instanceof Error ? error.message : String(error)}; ${i} of ${keys.length} keys were pressed`,
      );
    }
    if (key.bytes === '\x1b' && i < keys.length - 1) {
      await new Promise<void>((resolve) => setTimeout(resolve, ESCAPE_GAP_MS));
    }
  }
}

/**
 * Listen for keys for the PTY turn of `session`. A turn whose keys socket cannot be set up still runs;
 * it says why in a diagnostic event (and `sessions keys` finds no turn to type into). Each request is
 * refused once the session is no longer active (closed while its turn runs on).
 */
export async function serveTurnKeys(
  context: PtyKeysContext,
  session: { id: string; slug: string },
  child: () => EngineProcess | undefined,
  emit: (events: TurnEvent[]) => void,
): Promise<{ close: () => Promise<void> } | undefined> {
  const { sessionStatus } = context;
  let server: KeysServer;
  let dir: string | undefined;
  try {
    dir = runtimeDirOf(context.env, context.dataDir);
    server = await serveKeys(keysSocketPath(dir, session.slug), (keys) => pressKeys(child(), keys), {
      prepareDir: () => ensureRuntimeDir(context.env, context.dataDir),
      refusal: sessionStatus
        ? async () => {
            const status = await sessionStatus(session.id);
            return status === 'active'
              ? null
              : `the session is ${status ?? 'not in the registry'}: no keys reach it`;
          }
        : undefined,
    });
  } catch (error) {
    emit([
      {
        type: 'diagnostic',
        message: `keys cannot be pressed during this turn: ${error instanceof Error ? error.message : String(error)}`,
      },
    ]);
    return undefined;
  }
  let closing: Promise<void> | undefined;
  const runtimeDir = dir;
  return {
    close: () =>
      (closing ??= server.close().then(() => {
        // The data dir's runtime directory goes with its last socket (tests and one-off runs leave none).
        removeIfEmpty(runtimeDir);
      })),
  };
}

/** The keys socket of `slug` when its directory is ours; `missing` when no turn made it; else an error. */
function reachableSocket(context: PtyKeysContext, workItem: string, slug: string): string | 'missing' {
  const path = keysSocketPath(runtimeDirOf(context.env, context.dataDir), slug);
  const problem = socketPathProblem(path);
  if (problem) {
    throw new LoopError('usage', `${problem}: keys cannot reach ${workItem}`, {
      hint: 'Set TMPDIR to a shorter directory: the runtime directory is <TMPDIR>/the-loop-<uid>.',
    });
  }
  // Checked before connecting: in a shared /tmp, a directory someone else made is nobody we talk to.
  for (const dir of [dirname(dirname(path)), dirname(path)]) {
    const why = privateDirProblem(dir);
    if (why === 'missing') return 'missing';
    if (why) throw new LoopError('internal', `refusing the runtime directory: ${why}`);
  }
  return path;
}

/** The error for a session with no turn listening. */
const noTurnRunning = (workItem: string) =>
  new LoopError(
    'session-missing',
    `no turn of ${workItem} is running: keys reach a pty engine only while its turn runs`,
    {
      hint: 'Press them while a turn runs (`the-loop sessions show` lists it as running), or send text as the next turn with `the-loop sessions send`.',
    },
  );

/**
 * `the-loop sessions keys` for a process-runner session: the keys go to the keys socket of its
 * running PTY turn (served by whichever process runs that turn — a daemon, a `the-loop run`).
 * An engine not on a PTY, or no turn running, is a clear error (invariant 7).
 */
export async function sendTurnKeys(
  context: PtyKeysContext | undefined,
  session: { workItem: string; slug: string },
  preset: EnginePreset | undefined,
  words: readonly string[],
): Promise<{ target: string; sent: SentKey[] }> {
  if (!preset?.pty) {
    throw new LoopError(
      'usage',
      `${session.workItem} runs on the process runner: its engine has no terminal to type into`,
      {
        hint: 'Keys reach engines in the tmux runner (--runner tmux), and process-runner engines on a PTY (pty: true under engines.<name> in the config) while a turn runs. To send text as a turn, use `the-loop sessions send`.',
      },
    );
  }
  if (!context) throw new LoopError('internal', 'this process runner has no data dir for keys');
  const path = reachableSocket(context, session.workItem, session.slug);
  const planned = planKeys(words);
  // Only stripping can turn a word into a key name: type it as it was meant, or not at all.
  const renamed = planned.find((k) => k.literal && NAMED_KEY.test(k.key));
  if (renamed) {
    throw new LoopError('usage', `"${renamed.key}" (after removing control characters) is a key name`, {
      hint: 'Name the keys you mean (Escape, C-c) and type text without control characters.',
    });
  }
  if (path === 'missing') throw noTurnRunning(session.workItem);
  let reply: Awaited<ReturnType<typeof requestKeys>>;
  try {
    reply = await requestKeys(
      path,
      planned.map((k) => k.key),
    );
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ECONNREFUSED') throw noTurnRunning(session.workItem);
    throw new LoopError(
      'internal',
      `cannot reach the running turn of ${session.workItem}: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  if (!reply.ok) throw new LoopError('usage', `the engine's terminal took no keys: ${reply.error}`);
  return { target: `${session.slug} (pty)`, sent: reply.sent };
}
