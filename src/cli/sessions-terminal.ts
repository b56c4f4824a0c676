import { spawnSync } from 'node:child_process';
import { LoopError } from '../core/errors.js';
import type { SessionRecord } from '../core/ports/sessions.js';
import type { App } from '../main.js';
import { isAttachable, isKeyed } from '../runners/runner.js';
import { toJson } from './format.js';
import { EXIT, type Io } from './io.js';
import { findSession } from './sessions.js';

/** The terminal side of `sessions`: attach to a tmux session, press keys in a running turn. */

/** `sessions attach`: run the session's runner's attach command (tmux attach-session [-r] -t <target>). */
export async function attachSession(app: App, ref: string, options: { readOnly?: boolean }): Promise<number> {
  const session = await findSession(app.store, ref);
  await refuseElsewhere(app, session);
  const runner = runnerOf(app, session.runner);
  if (!runner || !isAttachable(runner) || !session.tmuxTarget) {
    throw new LoopError(
      'usage',
      `${session.workItem} runs on the ${session.runner} runner: there is no terminal to attach to`,
      {
        hint: 'Follow it with `the-loop sessions logs` instead, or start tmux sessions with --runner tmux.',
      },
    );
  }
  const command = await runner.attachCommand(
    { tmuxTarget: session.tmuxTarget, status: session.status },
    { readOnly: options.readOnly },
  );
  const result = spawnSync(command.file, command.args, { stdio: 'inherit' });
  if (result.error) throw new LoopError('binary-missing', `cannot run tmux: ${result.error.message}`);
  return result.status === 0 ? EXIT.ok : EXIT.failed;
}

/** A word as a POSIX shell reads it back (for a command shown to a person, never run here). */
const shellWord = (word: string) =>
  /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;

/**
 * On a shared store, a session whose work item another host holds has its terminal on that host:
 * say which, and how to reach it, instead of attaching to nothing here.
 */
async function refuseElsewhere(app: App, session: SessionRecord): Promise<void> {
  const { hosts, hostId } = app.stores;
  if (!hosts || !hostId) return;
  const lease = await hosts.lease(session.workItem);
  if (!lease || lease.ended || lease.hostId === hostId) return;
  const host = (await hosts.list()).find((h) => h.id === lease.hostId);
  const address = host?.address ?? lease.hostId;
  const target = session.tmuxTarget ?? session.slug;
  throw new LoopError('usage', `${session.workItem} runs on host ${lease.hostId}, not this one (${hostId})`, {
    hint: `Attach there: ssh ${shellWord(address)} -t tmux attach -t ${shellWord(`=${target}`)}`,
  });
}

/**
 * `sessions keys <wi> Escape Up y Enter C-c`: keystrokes into a session's engine — named keys pressed
 * as keys, other words typed as literal text stripped of control characters (`planKeys`). The
 * session's runner presses them (tmux: `send-keys` into its pane; the process runner: into the PTY
 * of a running turn). A session with no terminal is a clear error, never a silent no-op (invariant 7).
 */
export async function keysCommand(
  app: App,
  io: Io,
  ref: string,
  keys: string[],
  options: { json?: boolean },
): Promise<number> {
  const session = await findSession(app.store, ref);
  // Keys reach a live session only, even if a pane of an ended one lingers.
  if (session.status !== 'active')
    throw new LoopError('usage', `${session.workItem}'s session is ${session.status}: no keys reach it`);
  const runner = runnerOf(app, session.runner);
  if (!runner || !isKeyed(runner)) {
    throw new LoopError(
      'usage',
      `${session.workItem} runs on the ${session.runner} runner: its engine has no terminal to type into`,
      {
        hint: 'Keys reach engines in the tmux runner (--runner tmux). To send text as a turn, use `the-loop sessions send`.',
      },
    );
  }
  if (keys.length === 0)
    throw new LoopError('usage', 'no keys given', {
      hint: 'e.g. the-loop sessions keys github:o/r#1 Escape',
    });
  const preset = Object.hasOwn(app.loaded.engines, session.engine)
    ? app.loaded.engines[session.engine]
    : undefined;
  const { target, sent } = await runner.sendKeys(session, preset, keys);
  if (options.json) io.out(`${toJson({ target, sent })}\n`);
  else io.out(`sent to ${target}: ${sent.map((k) => (k.literal ? toJson(k.key) : k.key)).join(' ')}\n`);
  return EXIT.ok;
}

const runnerOf = (app: App, name: string) =>
  Object.hasOwn(app.runners, name) ? app.runners[name] : undefined;
