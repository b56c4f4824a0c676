import type { ConnectorBackend, Key, ReadResult, RunRequest, RunResult, Terminal } from '../backend.js';
import { TmuxExec, type TmuxExecOptions } from './tmux-exec.js';
import { closePane, readPane, sendKeys, sendText } from './tmux-io.js';
import { listTerminals, tmuxAvailable } from './tmux-list.js';
import { runInNewPane } from './tmux-run.js';
import { runInPane } from './tmux-run-pane.js';
import { RunFiles } from './tmux-scratch.js';

/**
 * The tmux backend of the connector: a terminal is a pane (`%N`), named by its session. Every act is
 * one tmux call fused with a check that the pane still belongs to the listed session identity
 * (tmux-fused.ts); text goes through a buffer from stdin, keys by their tmux names, commands as one
 * argv element of a shell in a pane whose death tmux records (tmux-run.ts).
 */
export class TmuxBackend implements ConnectorBackend {
  readonly name = 'tmux' as const;
  private readonly exec: TmuxExec;
  private readonly files = new RunFiles();

  constructor(options: TmuxExecOptions = {}) {
    this.exec = new TmuxExec(options);
  }

  available(): Promise<{ ok: true } | { ok: false; reason: string }> {
    return tmuxAvailable(this.exec);
  }

  list(): Promise<Terminal[]> {
    return listTerminals(this.exec);
  }

  read(terminal: Terminal, options: { lines: number; history: boolean }): Promise<ReadResult> {
    return readPane(this.exec, terminal, options);
  }

  sendText(terminal: Terminal, text: string): Promise<void> {
    return sendText(this.exec, terminal, text);
  }

  sendKeys(terminal: Terminal, keys: readonly Key[]): Promise<void> {
    return sendKeys(this.exec, terminal, keys);
  }

  run(terminal: Terminal, request: RunRequest, signal?: AbortSignal): Promise<RunResult> {
    return request.where === 'pane'
      ? runInPane(this.exec, terminal, request, signal)
      : runInNewPane(this.exec, this.files, terminal, request, signal);
  }

  close(terminal: Terminal): Promise<void> {
    return closePane(this.exec, terminal);
  }

  /** tmux children running now (a finished or stopped run leaves none). */
  get waiting(): number {
    return this.exec.waiting;
  }

  async dispose(): Promise<void> {
    await this.exec.killAll();
    this.files.dispose();
  }
}
