import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * The files a new-pane run starts from, in a private directory of this backend (0700, removed at
 * dispose): a fixed wrapper script, and one file per run holding the command. So the command never
 * travels on a tmux command line (no length limit, no parsing, no format expansion) and the window
 * can be created inside the identity check's branch, whose text holds only these validated paths.
 *
 * The wrapper waits for one line on its terminal (the go: Enter, sent once the pane is armed), drops
 * tmux's variables (hygiene, not a boundary: the tmux socket is still there to be found) and runs the
 * command file with the pane's shell (`$SHELL`: the session's `default-shell`) when that is a known
 * POSIX-like shell, else with /bin/sh. The command file is removed once the run has ended.
 */

const WRAPPER = `IFS= read -r _ || exit 125
unset TMUX TMUX_PANE
file=$1
case "\${SHELL##*/}" in
  bash|zsh|sh|dash|ksh|mksh) exec "$SHELL" "$file" ;;
  *) exec /bin/sh "$file" ;;
esac
`;

/** What may appear in a tmux command string: an absolute path of plain characters. */
const SAFE_PATH = /^\/[A-Za-z0-9._/-]{1,300}$/;

export class RunFiles {
  private root: string | null = null;

  /** The private directory (made on first use); its path only of SAFE_PATH characters. */
  private dir(): string {
    if (this.root) return this.root;
    const base = SAFE_PATH.test(tmpdir()) ? tmpdir() : '/tmp';
    const dir = mkdtempSync(join(base, 'the-loop-run-'));
    chmodSync(dir, 0o700);
    writeFileSync(join(dir, 'wrapper.sh'), WRAPPER, { mode: 0o600 });
    this.root = dir;
    return dir;
  }

  /** Write one run's command; returns the wrapper's path and the command file's. */
  write(hex: string, command: string): { wrapper: string; file: string } {
    const dir = this.dir();
    const file = join(dir, `cmd-${hex}`);
    // A trailing newline: a last line without one is still run by every shell, but tidier.
    writeFileSync(file, command.endsWith('\n') ? command : `${command}\n`, { mode: 0o600, flag: 'wx' });
    const wrapper = join(dir, 'wrapper.sh');
    if (!SAFE_PATH.test(file) || !SAFE_PATH.test(wrapper)) throw new Error(`unsafe run file path ${file}`);
    return { wrapper, file };
  }

  remove(file: string): void {
    rmSync(file, { force: true });
  }

  dispose(): void {
    if (this.root) rmSync(this.root, { recursive: true, force: true });
    this.root = null;
  }
}
