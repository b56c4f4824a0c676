import type { RunRequest, RunResult, Terminal } from '../backend.js';
import { ConnectorError } from '../names.js';
import { checkBuffer, checkChannel, checkOption, checkPane, type TmuxExec, token } from './tmux-exec.js';
import { fused } from './tmux-fused.js';
import { captureLines, pasteText } from './tmux-io.js';
import { race, tail } from './tmux-run.js';

/**
 * `run` typed into an existing pane, only when it sits at a shell prompt (its foreground program is a
 * known shell, no mode, no alternate screen, not dead — checked by tmux in the same call as the
 * paste). The command goes as a bracketed paste from stdin, followed by a trailer line holding only
 * our validated values:
 *
 *     command tmux set-option -p -t %N @the_loop_status_<hex> "$?" \; wait-for -S the-loop-run-<hex>
 *
 * then Enter. The shell runs the command, then the trailer, which stores `$?` on the pane and signals
 * our channel; a `tmux wait-for` child of ours returns and we read the option (and unset it).
 * Limits: the shell must find `tmux` on its PATH and keep `$TMUX`; a command that reads stdin may eat
 * the trailer, one that leaves a quote open swallows it, and `exit` ends the shell — each shows as a
 * timeout. On a timeout nothing more is sent: the user's shell is never interrupted by us.
 */

async function unsetOption(exec: TmuxExec, pane: string, option: string): Promise<void> {
  await exec.run(['set-option', '-p', '-u', '-t', pane, option]);
}

/** Paste the command and the trailer, press Enter; returns the absolute line the command starts on. */
async function typeCommand(
  exec: TmuxExec,
  terminal: Terminal,
  command: string,
  trailer: string,
): Promise<number> {
  const pane = checkPane(terminal.id);
  const buffer = checkBuffer(`the-loop-${token()}`);
  const mark = `the-loop-start-${token()}`;
  let pasted = false;
  try {
    const out = await fused(exec, terminal, {
      before: ['load-buffer', '-b', buffer, '-'],
      act: [
        // Whatever was half-typed at the prompt is cleared first (bash and zsh keep it: C-y).
        `send-keys -t ${pane} C-e C-u`,
        `display-message -p -t ${pane} '${mark} #{history_size} #{cursor_y}'`,
        `paste-buffer -p -d -b ${buffer} -t ${pane}`,
        `send-keys -t ${pane} Enter`,
      ].join(' ; '),
      require: 'prompt',
      input: `${command}\n${trailer}`,
    });
    pasted = true;
    const match = /^(\d+) (\d+)$/.exec(out.split('\n')[0]?.slice(mark.length + 1) ?? '');
    return match ? Number(match[1]) + Number(match[2]) : 0;
  } finally {
    if (!pasted) await exec.run(['delete-buffer', '-b', buffer]);
  }
}

/** The exit status stored by the trailer, the pane's lines from `start` on. */
async function collect(
  exec: TmuxExec,
  pane: string,
  option: string,
  start: number,
): Promise<{ status: number | null; lines: string[] }> {
  const mark = `the-loop-status-${token()}`;
  const r = await exec.run([
    ...['display-message', '-p', '-t', pane, `${mark} #{history_size} #{${option}}`, ';'],
    ...['capture-pane', '-p', '-J', '-S', '-', '-E', '-', '-t', pane],
  ]);
  if (!r.ok) {
    throw new ConnectorError('E_TARGET_GONE', `pane ${pane} went away while the command ran`);
  }
  const newline = r.stdout.indexOf('\n');
  const [, status] = r.stdout.slice(mark.length + 1, newline).split(' ');
  const all = captureLines(r.stdout.slice(newline + 1));
  return { status: status && /^\d{1,3}$/.test(status) ? Number(status) : null, lines: all.slice(start) };
}

export async function runInPane(
  exec: TmuxExec,
  terminal: Terminal,
  request: RunRequest,
  signal?: AbortSignal,
): Promise<RunResult> {
  const started = Date.now();
  const pane = checkPane(terminal.id);
  const command = pasteText(request.command).replace(/\n+$/, '');
  if (command.trim() === '') throw new ConnectorError('E_INVALID', 'an empty command');
  const hex = token();
  const channel = checkChannel(`the-loop-run-${hex}`);
  const option = checkOption(`@the_loop_status_${hex}`);
  // The leading space keeps the trailer out of a shell history that ignores such lines.
  const trailer = ` command tmux set-option -p -t ${pane} ${option} "$?" \\; wait-for -S ${channel}`;
  const waiter = exec.start(['wait-for', channel]);
  try {
    const start = await typeCommand(exec, terminal, command, trailer);
    const outcome = await race(
      waiter.result.then(() => undefined),
      request.timeoutMs,
      signal,
    );
    waiter.kill();
    const timedOut = outcome.kind === 'timeout';
    const { status, lines } = await collect(exec, pane, option, start);
    if (!timedOut) await unsetOption(exec, pane, option);
    // The trailer as the shell echoed it is ours, not the command's output.
    const output = lines.filter((line) => !line.includes(channel));
    return {
      exitStatus: timedOut ? null : status,
      signal: null,
      timedOut,
      ...tail(output, request.maxLines),
      ranIn: pane,
      kept: false,
      durationMs: Date.now() - started,
    };
  } finally {
    waiter.kill();
  }
}
