import { LoopError } from '../../core/errors.js';
import { planKeys, type SentKey } from '../keys.js';
import { checkTarget, type Tmux } from './tmux.js';

/** The terminal side of a tmux session: people press keys in it, or join it with `tmux attach`. */

/**
 * `send-keys` into the session's pane: named keys pressed as keys, other words typed as literal text
 * (`-l`), each as its own argv element. A tmux session that is gone is a clear error.
 */
export async function pressKeys(tmux: Tmux, tmuxTarget: string, keys: readonly string[]): Promise<SentKey[]> {
  const target = checkTarget(tmuxTarget);
  if (!(await tmux.hasSession(target))) {
    throw new LoopError('session-missing', `tmux session ${target} is gone`, {
      hint: 'See `the-loop sessions list --all`.',
    });
  }
  const sent: SentKey[] = [];
  for (const key of planKeys(keys)) {
    await tmux.must(
      // `--`: a text that starts with `-` is typed, not read as a flag.
      ['send-keys', '-t', `=${target}:`, ...(key.literal ? ['-l', '--', key.key] : [key.key])],
      'send-keys',
    );
    sent.push(key);
  }
  return sent;
}

/** `tmux attach-session [-r] -t <target>` on our server; a tmux session that is gone is a clear error. */
export async function attachCommand(
  tmux: Tmux,
  session: { tmuxTarget: string; status: string },
  options: { readOnly?: boolean | undefined },
): Promise<{ file: string; args: string[] }> {
  const target = checkTarget(session.tmuxTarget);
  if (!(await tmux.hasSession(target))) {
    throw new LoopError('session-missing', `tmux session ${target} is gone (${session.status} session)`, {
      hint: 'See `the-loop sessions list --all`; the next turn on this work item starts a new TUI.',
    });
  }
  return {
    file: 'tmux',
    args: [...tmux.baseArgs(), 'attach-session', ...(options.readOnly ? ['-r'] : []), '-t', `=${target}`],
  };
}
