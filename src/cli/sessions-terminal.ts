import { spawnSync } from 'node:child_process';
import { LoopError } from '../core/errors.js';
import type { App } from '../main.js';
import { planKeys, type SentKey } from '../runners/keys.js';
import { Tmux } from '../runners/tmux/tmux.js';
import { toJson } from './format.js';
import { EXIT, type Io } from './io.js';
import { findSession } from './sessions.js';

/** The terminal side of `sessions`: attach to a tmux session, press keys in a running turn. */

/** `sessions attach`: exec `tmux attach-session [-r] -t <target>` on the configured socket. */
export async function attachSession(app: App, ref: string, options: { readOnly?: boolean }): Promise<number> {
  const session = findSession(app.store, ref);
  if (session.runner !== 'tmux' || !session.tmuxTarget) {
    throw new LoopError(
      'usage',
      `${session.workItem} runs on the ${session.runner} runner: there is no terminal to attach to`,
      {
        hint: 'Follow it with `the-loop sessions logs` instead, or start tmux sessions with --runner tmux.',
      },
    );
  }
  const tmux = new Tmux({ socket: app.loaded.config.tmux.socket });
  if (!(await tmux.hasSession(session.tmuxTarget))) {
    throw new LoopError(
      'session-missing',
      `tmux session ${session.tmuxTarget} is gone (${session.status} session)`,
      {
        hint: 'See `the-loop sessions list --all`; the next turn on this work item starts a new TUI.',
      },
    );
  }
  const result = spawnSync(
    'tmux',
    [
      ...tmux.baseArgs(),
      'attach-session',
      ...(options.readOnly ? ['-r'] : []),
      '-t',
      `=${session.tmuxTarget}`,
    ],
    {
      stdio: 'inherit',
    },
  );
  if (result.error) throw new LoopError('binary-missing', `cannot run tmux: ${result.error.message}`);
  return result.status === 0 ? EXIT.ok : EXIT.failed;
}

/**
 * `sessions keys <wi> Escape Up y Enter C-c`: keystrokes into a session's engine — named keys pressed
 * as keys, other words typed as literal text stripped of control characters (`planKeys`). In tmux:
 * `send-keys` (literal text with `-l`), each as its own argv element. Elsewhere the session's runner
 * presses them (the process runner: into the PTY of a running turn). A session with no terminal is a
 * clear error, never a silent no-op (invariant 7).
 */
export async function keysCommand(
  app: App,
  io: Io,
  ref: string,
  keys: string[],
  options: { json?: boolean },
): Promise<number> {
  const session = findSession(app.store, ref);
  // Keys reach a live session only, even if a pane of an ended one lingers.
  if (session.status !== 'active')
    throw new LoopError('usage', `${session.workItem}'s session is ${session.status}: no keys reach it`);
  const runner = Object.hasOwn(app.runners, session.runner) ? app.runners[session.runner] : undefined;
  const tmuxTarget = session.runner === 'tmux' ? session.tmuxTarget : null;
  const sendKeys = runner?.sendKeys?.bind(runner);
  const preset = Object.hasOwn(app.loaded.engines, session.engine)
    ? app.loaded.engines[session.engine]
    : undefined;
  const press = tmuxTarget
    ? async () => ({ target: tmuxTarget, sent: await tmuxKeys(app, tmuxTarget, keys) })
    : sendKeys
      ? () => sendKeys({ workItem: session.workItem, slug: session.slug }, preset, keys)
      : undefined;
  if (!press) {
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
  const { target, sent } = await press();
  if (options.json) io.out(`${toJson({ target, sent })}\n`);
  else io.out(`sent to ${target}: ${sent.map((k) => (k.literal ? toJson(k.key) : k.key)).join(' ')}\n`);
  return EXIT.ok;
}

async function tmuxKeys(app: App, tmuxTarget: string, keys: readonly string[]): Promise<SentKey[]> {
  const tmux = new Tmux({ socket: app.loaded.config.tmux.socket });
  if (!(await tmux.hasSession(tmuxTarget))) {
    throw new LoopError('session-missing', `tmux session ${tmuxTarget} is gone`, {
      hint: 'See `the-loop sessions list --all`.',
    });
  }
  const sent: SentKey[] = [];
  for (const key of planKeys(keys)) {
    await tmux.must(
      ['send-keys', '-t', `=${tmuxTarget}:`, ...(key.literal ? ['-l', key.key] : [key.key])],
      'send-keys',
    );
    sent.push(key);
  }
  return sent;
}
