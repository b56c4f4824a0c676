import type { Handler, Run, State } from './context.js';
import type { Arg } from './expand.js';

/**
 * Shells and eval: the text they run is classified as a script of its own (`sh -c '…'`, a script on
 * stdin, `eval …`); an argument that is wholly an expansion is unknowable and said so.
 */

const SHELL_VALUED = new Set(['-o', '+o', '-O', '+O', '--rcfile', '--init-file']);

/** sh/bash/zsh/…: `-c 'script'`, or a script on stdin (heredoc, here-string, `… | sh`). */
export const shell: Handler = (run) => {
  const args = run.args;
  let command = false;
  let i = 0;
  for (; i < args.length; i++) {
    const arg = args[i] as Arg;
    const t = arg.f;
    if (arg.dynamic || !(t.startsWith('-') || t.startsWith('+')) || t.length < 2) break;
    if (t === '--' || t === '-') {
      i++;
      break;
    }
    if (SHELL_VALUED.has(t)) {
      i++;
      continue;
    }
    if (!t.startsWith('--') && t.slice(1).includes('c')) command = true;
  }
  const script = args[i];
  if (command) {
    if (script) runScript(run, script, 'sh-c');
    return;
  }
  if (script) return; // `bash deploy.sh`: the script's text is not on the command line
  if (run.stdin?.text !== undefined) run.script(run.stdin.text, run.stdin.via);
  else if (run.stdin) {
    run.emit('dynamic-command', {
      reason: `script piped in from ${run.stdin.from ?? 'another command'}`,
      via: 'pipe-to-shell',
    });
  }
};

/** Tools whose output is meant to be eval'd to set up a shell; `eval "$(tool …)"` is not hiding a command. */
const SHELL_SETUP =
  /^\$\(\s*(ssh-agent|pyenv|rbenv|nodenv|goenv|jenv|plenv|direnv|brew|conda|mamba|micromamba|fnm|starship|zoxide|keychain|gpg-agent|opam|luarocks|mise|rtx|asdf|thefuck|dircolors|nvm|volta|rustup|gcloud|kubectl completion|navi|atuin|fzf)\b/;

/** Classifies shell text found in an argument; an argument that is wholly an expansion is unknowable. */
export function runScript(run: Run, arg: Arg, evasion: 'sh-c' | 'eval', state?: State): void {
  if (arg.dynamic && /^\s*[$`]/.test(arg.text) && !SHELL_SETUP.test(arg.text.trim())) {
    run.emit('dynamic-command', { reason: `${evasion === 'eval' ? 'eval' : 'sh -c'} of an expansion` });
  }
  run.script(arg.text, evasion, state);
}

export const evalCommand: Handler = (run) => {
  if (run.args.length === 0) return;
  const text = run.args.map((a) => a.text).join(' ');
  // eval runs in this shell: its `cd` and assignments stay.
  runScript(
    run,
    { ...(run.args[0] as Arg), text, dynamic: run.args.some((a) => a.dynamic) },
    'eval',
    run.state,
  );
};
