import { type ChildProcess, spawn } from 'node:child_process';
import type { Logger } from '../../log/logger.js';
import { checkTarget, type Tmux } from '../../runners/tmux/tmux.js';
import { viewerEnv } from './pty-viewer.js';
import { stopPid } from './stop.js';

/**
 * A writer's way into the pane: one tmux control-mode client per taken-over session
 * (`tmux -C attach-session -t =<target> -f ignore-size,no-output`, argv only), kept open while the
 * session is taken over. Keys go as `send-keys -H -t <pane> <hex…>`: tmux writes those bytes to the
 * pane exactly (checked here on tmux 3.3a), and no typed text ever appears on a tmux command line.
 * `no-output` spares tmux from sending the pane's output to this client; `ignore-size` keeps its
 * (nonexistent) size out of the window's.
 *
 * Control mode answers each command with a `%begin <time> <number> <flags>` … `%end`/`%error` block,
 * in order; flags 1 marks a command of this client (the attach's own block has 0).
 */

/** Bytes per `send-keys -H` command: a line of ~1.5 KB, far below anything tmux minds. */
export const SEND_KEYS_CHUNK = 512;

const PANE_ID = /^%\d+$/;

/** The control-mode command lines that type `bytes` into `paneId` (pure). */
export function sendKeysCommands(paneId: string, bytes: Uint8Array, chunk = SEND_KEYS_CHUNK): string[] {
  if (!PANE_ID.test(paneId)) throw new Error(`refusing unsafe pane id ${JSON.stringify(paneId)}`);
  const lines: string[] = [];
  for (let at = 0; at < bytes.length; at += chunk) {
    const hex = Array.from(bytes.subarray(at, at + chunk), (b) => b.toString(16).padStart(2, '0'));
    lines.push(`send-keys -H -t ${paneId} ${hex.join(' ')}\n`);
  }
  return lines;
}

export class ControlClient {
  private readonly child: ChildProcess;
  /** Resolves when the client process has ended. */
  readonly exited: Promise<void>;
  private readonly waiting: Array<(ok: boolean) => void> = [];
  private buffer = '';
  private inBlock: { mine: boolean } | null = null;
  private gone = false;

  constructor(
    tmux: Tmux,
    private readonly target: string,
    private readonly logger: Logger,
  ) {
    this.child = spawn(
      'tmux',
      [
        ...tmux.baseArgs(),
        '-C',
        'attach-session',
        '-t',
        `=${checkTarget(target)}`,
        '-f',
        'ignore-size,no-output',
      ],
      { stdio: ['pipe', 'pipe', 'pipe'], env: viewerEnv(process.env) },
    );
    this.exited = new Promise((resolve) => {
      this.child.once('close', () => resolve());
      this.child.once('error', () => resolve());
    });
    void this.exited.then(() => this.ended());
    this.child.stdin?.on('error', () => {});
    this.child.stdout?.setEncoding('utf8');
    this.child.stdout?.on('data', (text: string) => this.read(text));
    this.child.stderr?.resume();
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return !this.gone;
  }

  /** Type bytes into the pane; resolves when tmux has done it (false: it refused, or the client is gone). */
  sendKeys(paneId: string, bytes: Uint8Array): Promise<boolean> {
    const lines = sendKeysCommands(paneId, bytes);
    return Promise.all(lines.map((line) => this.command(line))).then((oks) => oks.every(Boolean));
  }

  /** Set the window's size (the writer's terminal); `window-size` becomes manual (tmux cmd-resize-window.c). */
  resizeWindow(cols: number, rows: number): Promise<boolean> {
    if (!Number.isInteger(cols) || !Number.isInteger(rows)) return Promise.resolve(false);
    return this.command(`resize-window -t =${checkTarget(this.target)}: -x ${cols} -y ${rows}\n`);
  }

  /** End it: stdin closed (a control client exits at end of input), then signals by pid. */
  async close(): Promise<void> {
    this.child.stdin?.end();
    await stopPid(this.child.pid, this.exited, 'SIGTERM', 500);
  }

  private command(line: string): Promise<boolean> {
    if (this.gone || !this.child.stdin?.writable) return Promise.resolve(false);
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.child.stdin?.write(line);
    });
  }

  private read(text: string): void {
    this.buffer += text;
    for (let nl = this.buffer.indexOf('\n'); nl >= 0; nl = this.buffer.indexOf('\n')) {
      const line = this.buffer.slice(0, nl).replace(/\r$/, '');
      this.buffer = this.buffer.slice(nl + 1);
      this.line(line);
    }
    // Without `%output` lines nothing long arrives; bound the partial line anyway.
    if (this.buffer.length > 1024 * 1024) this.buffer = '';
  }

  private line(line: string): void {
    const begin = /^%begin \d+ \d+ (\d+)$/.exec(line);
    if (begin) {
      this.inBlock = { mine: begin[1] === '1' };
      return;
    }
    const end = /^%(end|error) \d+ \d+ \d+$/.exec(line);
    if (end && this.inBlock) {
      const mine = this.inBlock.mine;
      this.inBlock = null;
      if (mine) this.waiting.shift()?.(end[1] === 'end');
      return;
    }
    if (this.inBlock?.mine) this.logger.debug('tmux control client said', { target: this.target, line });
  }

  private ended(): void {
    this.gone = true;
    for (const resolve of this.waiting.splice(0)) resolve(false);
  }
}
