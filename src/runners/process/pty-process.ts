import { closeSync, existsSync, constants as fsConstants, openSync, readSync, writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch, constants, platform } from 'node:os';
import { dirname, join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import type { ReadStream } from 'node:tty';
import { LoopError } from '../../core/errors.js';
import { whichBinary } from '../../engines/which.js';
import {
  type EngineProcess,
  type ExitStatus,
  notStarted,
  type OutputSinks,
  type SpawnRequest,
} from './engine-process.js';

/**
 * Engines with `pty: true` run on a pseudo-terminal from node-pty instead of pipes: the engine sees a
 * terminal on stdin, stdout and stderr, and people can press keys in it while a turn runs.
 *
 * The size is fixed. A PTY does not wrap long lines (only a terminal emulator does), so a long JSON
 * line arrives whole; the width matters only to engines that lay out text for it.
 */
export const PTY_COLS = 200;
export const PTY_ROWS = 50;

/** At most this much is read synchronously after the engine is gone (an escaped writer never stops). */
const DRAIN_MAX_BYTES = 16 * 1024 * 1024;
/** A terminal whose engine does not read it: how long a key waits for room before it is refused. */
const WRITE_RETRY_MS = 20;
const WRITE_RETRIES = 50;

/**
 * node-pty's native layer (node-pty 1.1.0, pinned): forkpty + exec of an argv array (no shell) in the
 * child, and a thread that waits for the child and reports its exit. Only this is used of node-pty.
 *
 * Its JavaScript terminal is not: it loses the end of the output when the engine exits while output
 * is still in the kernel — exactly where the result event is. It destroys its read stream 200 ms
 * after the exit (unixTerminal.js, DESTROY_SOCKET_TIMEOUT_MS; microsoft/node-pty#72, #726), and
 * libuv takes "hang-up + a short read" as end of file, while a PTY master always reads short (≤ 4 KiB)
 * and reports hang-up as soon as the engine closes its side, with output still queued. Seen here
 * under load: the last 5–15 KiB of a turn missing, its result event with them.
 */
interface NativePty {
  fork(
    file: string,
    args: string[],
    env: string[],
    cwd: string,
    cols: number,
    rows: number,
    uid: number,
    gid: number,
    utf8: boolean,
    helperPath: string,
    onExit: (code: number, signal: number) => void,
  ): { fd: number; pid: number; pty: string };
}

let loading: Promise<NativePty> | undefined;

/**
 * node-pty is a native addon compiled at install time. It is imported only when a PTY engine runs, so
 * a machine where it failed to build fails for those engines alone, with a clear error.
 */
export function loadNodePty(): Promise<NativePty> {
  loading ??= import('node-pty')
    .then((mod) => {
      // A CommonJS module: its exports are the namespace's default.
      const api = ((mod as { default?: unknown }).default ?? mod) as { native?: Partial<NativePty> | null };
      if (typeof api.native?.fork !== 'function') throw new Error('its native fork is missing');
      return api.native as NativePty;
    })
    .catch((cause: unknown) => {
      // Not cached: a rebuild under a running daemon is picked up by the next PTY turn.
      loading = undefined;
      throw new LoopError(
        'binary-missing',
        `node-pty cannot be loaded, so engines with pty: true cannot run: ${cause instanceof Error ? cause.message : String(cause)}`,
        {
          cause,
          hint: 'Rebuild it with `npm rebuild node-pty` (needs python3, make and a C++ compiler), or set pty: false for this engine.',
        },
      );
    });
  return loading;
}

/** The macOS spawn helper node-pty ships (unused on Linux, where the child is forked directly). */
function helperPath(): string {
  try {
    const root = dirname(createRequire(import.meta.url).resolve('node-pty/package.json'));
    const candidates = [
      join(root, 'build', 'Release', 'spawn-helper'),
      join(root, 'prebuilds', `${platform()}-${arch()}`, 'spawn-helper'),
    ];
    return candidates.find((path) => existsSync(path)) ?? '';
  } catch {
    return '';
  }
}

const SIGNAL_NAMES = new Map<number, NodeJS.Signals>(
  Object.entries(constants.signals).map(([name, n]) => [n, name as NodeJS.Signals]),
);

/**
 * Start the engine on a PTY, with an argv array (exec'd directly, never through a shell) and the
 * environment given (credentials travel only there). The child is a session leader with the PTY as
 * its controlling terminal, so its pid is also its process group id: the stop sequence signals `-pid`
 * exactly as for a detached pipe child.
 *
 * stdout and stderr share the terminal, so the output is one merged stream: it is both what the
 * protocol parses and the tail that explains a failure. The terminal turns each `\n` into `\r\n`
 * (ONLCR); the line reader strips that `\r`.
 *
 * Nothing is lost at the end: we hold the terminal's other side open ourselves, so it never hangs up
 * under the reader, and once the engine's processes are stopped `finishOutput` reads what is left
 * (until the kernel says there is nothing more) before closing.
 */
export function spawnPty(pty: NativePty, request: SpawnRequest, sinks: OutputSinks): EngineProcess {
  // An exec failure would be an exit of the forked child with a message on the terminal: look the
  // binary up first, so a missing one is the same "not found" error as with pipes (and never starts).
  const file = whichBinary(request.binary, request.env.PATH, request.cwd);
  if (!file) {
    return notStarted(
      Object.assign(new Error(`spawn ${request.binary} ENOENT`), { code: 'ENOENT', path: request.binary }),
    );
  }
  let status: ExitStatus | undefined;
  let onExit: (status: ExitStatus) => void = () => {};
  const exited = new Promise<ExitStatus>((resolve) => {
    onExit = resolve;
  });
  let forked: Forked;
  try {
    forked = forkPty(pty, file, request, (exit) => {
      status = exit;
      onExit(exit);
    });
  } catch (error) {
    return notStarted(error instanceof Error ? error : new Error(String(error)));
  }
  const terminal = readTerminal(forked, sinks);
  return {
    pid: forked.pid,
    exited,
    // Started: the fork succeeded (a failed exec is an exit with the reason on the terminal).
    spawnError: new Promise<Error>(() => {}),
    outputClosed: terminal.closed,
    hasExited: () => status !== undefined,
    // The terminal is the engine's input and there is no end-of-file to send on it (closing our side
    // would hang it up, which is a signal of its own): the stop sequence starts with SIGTERM.
    closeInput: () => false,
    finishOutput: terminal.finish,
    write: (text) => writeTerminal(forked.fd, text, () => terminal.finished() || status !== undefined),
  };
}

interface Forked {
  fd: number;
  pid: number;
  pty: string;
}

/** node-pty's native fork: the engine exec'd with its argv array and environment on a new PTY. */
function forkPty(
  pty: NativePty,
  file: string,
  request: SpawnRequest,
  onExit: (status: ExitStatus) => void,
): Forked {
  const env = { ...request.env, TERM: request.env.TERM || 'xterm-256color' };
  return pty.fork(
    file,
    request.argv,
    Object.entries(env).map(([name, value]) => `${name}=${value}`),
    request.cwd,
    PTY_COLS,
    PTY_ROWS,
    -1,
    -1,
    true,
    helperPath(),
    (code, signal) =>
      onExit(signal ? { code: null, signal: SIGNAL_NAMES.get(signal) ?? null } : { code, signal: null }),
  );
}

/**
 * node:tty (which loads node:net) is required by the first PTY turn, not imported: every command
 * that creates the app loads this module, and only PTY engines read a terminal.
 */
const ttyReadStream = (fd: number): ReadStream =>
  new (createRequire(import.meta.url)('node:tty') as typeof import('node:tty')).ReadStream(fd);

/**
 * The terminal's output, to the sinks, to its very end: `finish` (once the engine's processes are
 * stopped) reads what is left before closing.
 */
function readTerminal(
  forked: Forked,
  sinks: OutputSinks,
): { closed: Promise<void>; finish: () => void; finished: () => boolean } {
  const { fd } = forked;
  // Our own hold on the engine's side of the terminal (no controlling-terminal claim): while it is
  // open the master never reports hang-up, so no reader takes queued output for the end of it.
  let hold: number | undefined;
  try {
    hold = openSync(forked.pty, fsConstants.O_RDWR | fsConstants.O_NOCTTY);
  } catch {
    hold = undefined;
  }
  const decoder = new StringDecoder('utf8');
  const deliver = (chunk: Buffer) => {
    sinks.onOutput(chunk);
    sinks.onDiagnosticText(decoder.write(chunk));
  };
  const stream = ttyReadStream(fd);
  let streamClosed = false;
  // EIO once nobody holds the engine's side (only when our hold failed); the end is handled below.
  stream.on('error', () => {});
  stream.on('data', deliver);
  let finished = false;
  let onClosed: () => void = () => {};
  const closed = new Promise<void>((resolve) => {
    onClosed = resolve;
  });
  const finish = () => {
    if (finished) return;
    finished = true;
    if (!streamClosed) drainTerminal(stream, fd, deliver);
    if (hold !== undefined) closeSync(hold);
    hold = undefined;
    const rest = decoder.end();
    if (rest) sinks.onDiagnosticText(rest);
    sinks.onOutputEnd();
    onClosed();
  };
  stream.once('close', () => {
    streamClosed = true;
    finish();
  });
  return { closed, finish, finished: () => finished };
}

/**
 * What the terminal still holds, read synchronously from here to the close (so the descriptor
 * cannot be closed or reused in between), then the stream destroyed.
 */
function drainTerminal(stream: ReadStream, fd: number, deliver: (chunk: Buffer) => void): void {
  stream.pause();
  for (let chunk = stream.read() as Buffer | null; chunk !== null; chunk = stream.read() as Buffer | null) {
    deliver(chunk);
  }
  // A read of a PTY master first moves what the kernel still queues into the terminal, so
  // "nothing to read" (EAGAIN) means nothing is left; EIO means nobody holds the other side.
  const buffer = Buffer.alloc(64 * 1024);
  for (let total = 0; total < DRAIN_MAX_BYTES; ) {
    let n: number;
    try {
      n = readSync(fd, buffer, 0, buffer.length, null);
    } catch {
      break;
    }
    if (n === 0) break;
    total += n;
    deliver(Buffer.from(buffer.subarray(0, n)));
  }
  stream.destroy();
}

/** Type into the engine's terminal, waiting a little for room when it is full. */
async function writeTerminal(fd: number, text: string, gone: () => boolean): Promise<void> {
  let bytes = Buffer.from(text, 'utf8');
  for (let attempt = 0; bytes.length > 0; ) {
    // Checked right before each synchronous write: the descriptor is still ours.
    if (gone()) throw new Error('the engine has exited');
    try {
      bytes = bytes.subarray(writeSync(fd, bytes));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EAGAIN' || ++attempt > WRITE_RETRIES) {
        throw new Error(
          (error as NodeJS.ErrnoException).code === 'EAGAIN'
            ? 'the engine is not reading its terminal'
            : `cannot write to the terminal: ${(error as Error).message}`,
        );
      }
      await new Promise<void>((resolve) => setTimeout(resolve, WRITE_RETRY_MS));
    }
  }
}
