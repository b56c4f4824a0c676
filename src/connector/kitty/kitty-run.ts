import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunRequest, RunResult } from '../backend.js';
import { ConnectorError } from '../names.js';
import { type KittyClient, kittyError } from './kitty-client.js';
import type { KittyWindow } from './kitty-ls.js';
import { screenLines } from './kitty-text.js';

/**
 * `run` on kitty: the command runs in a new window of the target's tab, under a fixed `/bin/sh`
 * wrapper that writes the command's exit status to a file in a private directory of ours — the real
 * status, never a marker scraped from the screen. kitty 0.26.5's `launch` cannot report a child's
 * exit status (no `--wait-for-child-to-exit`), and `--hold` prints "Press Enter or Esc to exit"
 * into the output, so the wrapper itself keeps the window open (`sleep`) until its output is read.
 *
 * The command is never a `launch` argument: kitty replaces an argument that is exactly `@selection`
 * (and other `@…` words) with live data, so the command travels in a 0600 file the wrapper sources.
 * Every argument the wrapper gets is ours (paths of a directory we created, a number).
 */

// $1: the command file, $2: the status file, $3: how long to keep the window after the command.
// The status is written to a side file and renamed, so it is never read half-written.
const WRAPPER = '(. "$1"); s=$?; printf "%s\\n" "$s" > "$2.part" && mv -f "$2.part" "$2"; exec sleep "$3"';

/** How long a window lingers after its command if we never get to close it (a crashed daemon). */
const LINGER_SECONDS = '600';
const POLL_MS = 50;

interface Waited {
  status: number | null;
  timedOut: boolean;
  aborted: boolean;
}

async function readStatus(path: string): Promise<number | null | undefined> {
  try {
    const text = (await readFile(path, 'utf8')).trim();
    return /^\d{1,3}$/.test(text) ? Number(text) : null;
  } catch {
    return undefined;
  }
}

/** Poll for the status file until it appears, the timeout passes, or the call is cancelled. */
async function waitStatus(path: string, timeoutMs: number, signal?: AbortSignal): Promise<Waited> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await readStatus(path);
    if (status !== undefined) return { status, timedOut: false, aborted: false };
    if (signal?.aborted) return { status: null, timedOut: false, aborted: true };
    if (Date.now() >= deadline) return { status: null, timedOut: true, aborted: false };
    await new Promise((r) => setTimeout(r, Math.min(POLL_MS, Math.max(1, deadline - Date.now()))));
  }
}

async function launch(client: KittyClient, target: KittyWindow, dir: string, keep: boolean): Promise<number> {
  const args = ['launch', '--type=window', '--keep-focus', '--title', 'the-loop run'];
  // Matched by `window_id:` — a bare `id:` would first match a *tab* of that number.
  args.push('--match', `window_id:${target.windowId}`);
  // kitty reads `current`, `last_reported`, `oldest` as special values: only an absolute path is passed.
  if (target.cwd.startsWith('/')) args.push('--cwd', target.cwd);
  const linger = keep ? 'infinity' : LINGER_SECONDS;
  args.push(
    '--',
    '/bin/sh',
    '-c',
    WRAPPER,
    'the-loop-run',
    join(dir, 'command'),
    join(dir, 'status'),
    linger,
  );
  const r = await client.remote(args);
  if (!r.ok) {
    if (/no matching/i.test(r.stderr)) {
      throw new ConnectorError('E_TARGET_GONE', `kitty window ${target.windowId} went away before the run`);
    }
    throw new ConnectorError('E_BACKEND_UNAVAILABLE', `kitty launch failed: ${kittyError(r)}`);
  }
  const id = Number(r.stdout.trim());
  if (!Number.isInteger(id) || id <= 0)
    throw new Error(`kitty launch printed no window id: ${r.stdout.slice(0, 80)}`);
  return id;
}

async function windowText(client: KittyClient, windowId: number): Promise<string[] | null> {
  const r = await client.remote(['get-text', '--match', `id:${windowId}`, '--extent', 'all']);
  return r.ok ? screenLines(r.stdout) : null;
}

async function closeWindow(client: KittyClient, windowId: number): Promise<boolean> {
  const r = await client.remote(['close-window', '--match', `id:${windowId}`]);
  return r.ok;
}

/** Run `request.command` in a new window next to `target`; see the module comment. */
export async function runInNewWindow(
  client: KittyClient,
  target: KittyWindow,
  request: RunRequest,
  signal?: AbortSignal,
): Promise<RunResult> {
  const started = Date.now();
  const dir = await mkdtemp(join(tmpdir(), 'the-loop-kitty-run-'));
  try {
    await writeFile(join(dir, 'command'), `${request.command}\n`, { mode: 0o600 });
    const windowId = await launch(client, target, dir, request.keep);
    const waited = await waitStatus(join(dir, 'status'), request.timeoutMs, signal);
    const lines = (await windowText(client, windowId)) ?? [];
    // A command that ended is closed unless kept; one that did not end is always stopped (the
    // window's close hangs up its terminal: the command gets SIGHUP).
    const finished = !waited.timedOut && !waited.aborted;
    const closed = finished && request.keep ? false : await closeWindow(client, windowId);
    const last = lines.slice(-Math.max(0, request.maxLines));
    return {
      exitStatus: finished ? waited.status : null,
      signal: null,
      timedOut: waited.timedOut,
      output: last.join('\n'),
      truncated: lines.length > last.length,
      ranIn: `kitty:${windowId}`,
      kept: !closed,
      durationMs: Date.now() - started,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
