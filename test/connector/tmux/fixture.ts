import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Terminal } from '../../../src/connector/backend.js';
import { TmuxBackend } from '../../../src/connector/tmux/tmux-backend.js';
import { Tmux } from '../../../src/runners/tmux/tmux.js';
import { stopTmuxServer } from '../../helpers/tmux.js';

/**
 * A private tmux server for one test file (`tmux -L <unique>`), the backend on it, a temp dir for
 * canaries; `stop()` kills only that server and removes the dir.
 */
export interface Fixture {
  socket: string;
  tmux: Tmux;
  backend: TmuxBackend;
  dir: string;
  /** A detached 80x20 session running `argv` (default: an interactive bash without rc files). */
  session(name: string, argv?: string[]): Promise<void>;
  /** The listed terminal of a session's first pane. */
  terminal(name: string): Promise<Terminal>;
  screen(pane: string): Promise<string>;
  stop(): Promise<void>;
}

export const BASH = ['env', 'PS1=$ ', 'bash', '--norc', '--noprofile'];

export async function until<T>(probe: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 30));
  }
}

export function fixture(): Fixture {
  const socket = `tl-conn-${randomUUID().slice(0, 8)}`;
  const tmux = new Tmux({ socket });
  const backend = new TmuxBackend({ socket });
  const dir = mkdtempSync(join(tmpdir(), 'tl-conn-'));
  const f: Fixture = {
    socket,
    tmux,
    backend,
    dir,
    async session(name, argv = BASH) {
      await tmux.must(
        ['new-session', '-d', '-s', name, '-x', '80', '-y', '20', '-c', dir, '--', ...argv],
        'new-session',
      );
    },
    async terminal(name) {
      return until(async () => (await backend.list()).find((t) => t.name === name));
    },
    async screen(pane) {
      return (await tmux.run(['capture-pane', '-p', '-J', '-S', '-', '-t', pane])).stdout;
    },
    async stop() {
      await backend.dispose();
      await stopTmuxServer(tmux);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return f;
}
