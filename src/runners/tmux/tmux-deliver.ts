import { randomUUID } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { LoopError } from '../../core/errors.js';
import { sanitizeUntrusted } from '../../core/text.js';
import { checkBuffer } from './tmux.js';
import {
  ACCEPT_MS,
  saveState,
  sleep,
  type TmuxRunnerOptions,
  type TurnContext,
} from './tmux-session-state.js';

/**
 * Paste the prompt as inert text: sanitized (no ESC, so no bracketed-paste end marker; no control
 * characters but newline and tab), from a 0600 file through a uniquely named tmux buffer, with
 * bracketed paste (-p), then Enter after the engine's submit delay; confirmed by UserPromptSubmit.
 */
export async function deliver(
  options: TmuxRunnerOptions,
  ctx: TurnContext,
  submitDelayMs: number,
): Promise<void> {
  const { tmux } = options;
  const { target, dir, hooks, sessionId } = ctx;
  await pastePrompt(options, ctx);
  if (ctx.state.turn) {
    // From here, a restarted daemon presses Enter instead of pasting again.
    ctx.state.turn.phase = 'pasted';
    saveState(dir, ctx.state);
  }
  // Claude Code drops an Enter sent right after a paste (observed: swallowed every time at 0 ms).
  await sleep(submitDelayMs);
  await tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys Enter');
  if (!hooks) return;
  const accepted = await hooks.next({ event: 'UserPromptSubmit', sessionId }, { timeoutMs: ACCEPT_MS });
  if (accepted.ok) return;
  await tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys Enter (retry)');
  const retried = await hooks.next({ event: 'UserPromptSubmit', sessionId }, { timeoutMs: ACCEPT_MS });
  if (!retried.ok)
    throw new LoopError(
      'internal',
      `the prompt was pasted into ${target} but the engine did not accept it (no UserPromptSubmit)`,
    );
}

/** The bracketed paste itself, from a 0600 file removed afterwards. */
async function pastePrompt(options: TmuxRunnerOptions, ctx: TurnContext): Promise<void> {
  const { target, dir } = ctx;
  const text = sanitizeUntrusted(ctx.input.prompt, 1024 * 1024);
  const file = join(dir, `prompt-${randomUUID()}.txt`);
  const buffer = `the-loop-${randomUUID().slice(0, 8)}`;
  writeFileSync(file, text, { mode: 0o600 });
  try {
    // One tmux process for the three steps (each tmux call costs ~4 ms): leave copy mode if the pane
    // is in it (if-shell -F tests a format, no shell involved; the only text tmux parses there is the
    // validated target), load the buffer from the file, paste it bracketed and delete it.
    const pane = `=${target}:`;
    await options.tmux.must(
      [
        'if-shell',
        '-F',
        '-t',
        pane,
        '#{pane_in_mode}',
        `send-keys -t ${pane} -X cancel`,
        ';',
        'load-buffer',
        '-b',
        checkBuffer(buffer),
        file,
        ';',
        'paste-buffer',
        '-p',
        '-d',
        '-b',
        buffer,
        '-t',
        pane,
      ],
      'paste',
    );
  } finally {
    rmSync(file, { force: true });
  }
}
