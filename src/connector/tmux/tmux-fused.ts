import type { Terminal } from '../backend.js';
import { ConnectorError } from '../names.js';
import { checkIdentity, checkPane, type ExecResult, GONE, type TmuxExec, token } from './tmux-exec.js';

/**
 * Acting on a pane only while it is still the terminal that was listed: the check and the act are one
 * `if-shell -F` in one tmux call, so nothing can happen between them. Pane ids are reused after a
 * server restart, so the check compares the pane's session identity (`$id@created`), and optionally
 * that the pane is idle (no mode, not dead) or at a shell prompt. When the check fails, the else
 * branch prints the pane's state behind a random marker, and the caller gets E_TARGET_GONE or
 * E_PANE_BUSY. The branches hold only validated ids and our own constants.
 */

export type Require = 'none' | 'idle' | 'prompt';

/** Shells `run` may type into (a login shell shows as `-bash`). */
const SHELLS = '^-?(bash|zsh|sh|dash|ksh|mksh)$';

function condition(identity: string, require: Require): string {
  const same = `#{==:#{session_id}@#{session_created},${checkIdentity(identity)}}`;
  if (require === 'none') return same;
  const idle = '#{==:#{pane_in_mode}#{pane_dead},00}';
  if (require === 'idle') return `#{&&:${same},${idle}}`;
  const quiet = `#{&&:${idle},#{!=:#{alternate_on},1}}`;
  return `#{&&:${same},#{&&:${quiet},#{m/r:${SHELLS},#{pane_current_command}}}}`;
}

export interface FusedCall {
  /**
   * Commands before the check, as argv (never parsed by tmux: outside text may go here), e.g.
   * `load-buffer -b <ours> -`; whatever they create must be inert until `act` runs, and undone by
   * the caller when the check fails.
   */
  before?: string[];
  /** The tmux command string run when the check holds: validated values only. */
  act: string;
  require: Require;
  input?: string;
  timeoutMs?: number;
}

function busyReason(state: string[], require: Require): string {
  const [mode, dead, alternate, command] = state;
  if (dead === '1') return 'its program has exited (the pane is dead)';
  if (mode !== '0') return 'it is in copy mode (or another tmux mode); leave the mode first';
  if (require === 'prompt' && alternate === '1') return 'a full-screen program is running (alternate screen)';
  if (require === 'prompt') return `it is not at a shell prompt (running ${JSON.stringify(command ?? '')})`;
  return 'it is busy';
}

/** Run `call` against `terminal`'s pane; returns the act's stdout. */
export async function fused(exec: TmuxExec, terminal: Terminal, call: FusedCall): Promise<string> {
  const pane = checkPane(terminal.id);
  const mark = `the-loop-state-${token()}`;
  // Text fields last: a command name holding spaces cannot shift the others.
  const state = `${mark} #{session_id}@#{session_created} #{pane_in_mode} #{pane_dead} #{alternate_on} #{pane_current_command}`;
  const args = [
    ...(call.before ? [...call.before, ';'] : []),
    'if-shell',
    '-F',
    '-t',
    pane,
    condition(terminal.identity, call.require),
    call.act,
    `display-message -p -t ${pane} '${state}'`,
  ];
  const r = await exec.run(args, { input: call.input, timeoutMs: call.timeoutMs });
  return outcome(r, terminal, mark, call.require);
}

function outcome(r: ExecResult, terminal: Terminal, mark: string, require: Require): string {
  if (r.missing) throw new ConnectorError('E_BACKEND_UNAVAILABLE', 'tmux is not installed');
  // The else branch's line (after whatever the commands before the check printed).
  const line = r.stdout.split('\n').find((l) => l.startsWith(`${mark} `));
  if (line !== undefined) {
    const [identity, ...state] = line.slice(mark.length + 1).split(' ');
    if (identity !== terminal.identity) {
      throw new ConnectorError(
        'E_TARGET_GONE',
        `pane ${terminal.id} now belongs to another terminal (not the session ${JSON.stringify(terminal.name)} that was listed); list terminals again`,
      );
    }
    throw new ConnectorError('E_PANE_BUSY', `pane ${terminal.id} is busy: ${busyReason(state, require)}`);
  }
  if (!r.ok) {
    if (GONE.test(r.stderr)) {
      throw new ConnectorError(
        'E_TARGET_GONE',
        `pane ${terminal.id} (${JSON.stringify(terminal.name)}) is gone`,
      );
    }
    throw new Error(`tmux failed on ${terminal.id}: ${r.stderr.trim() || `exit ${r.code}`}`);
  }
  return r.stdout;
}
