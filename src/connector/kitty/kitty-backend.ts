import type { ConnectorBackend, Key, ReadResult, RunRequest, RunResult, Terminal } from '../backend.js';
import { ConnectorError } from '../names.js';
import { keyBytes } from './key-bytes.js';
import { KittyClient, type KittyResult, kittyError } from './kitty-client.js';
import { type KittyWindow, parseLs, windowIdOf } from './kitty-ls.js';
import { runInNewWindow } from './kitty-run.js';
import { screenWithCursor } from './kitty-text.js';

/**
 * The kitty backend: a terminal is a kitty window, reached through kitty's remote control
 * (`kitty @ --to <address>`). kitty acts on whatever a `--match` expression selects, and `send-text`
 * whose match selects nothing exits 0 having sent nothing; so every command here matches one window
 * by `id:<n>` only (a number we read from `ls`, never the agent's string), and the window is looked
 * up again — same id, same kitty process — right before each action: a target that is not there is
 * `E_TARGET_GONE`, never a silent no-op. kitty never reuses a window id within one
 * process, so a window that passed the check cannot have been replaced by another under that id.
 */

export interface KittyBackendOptions {
  /**
   * The remote-control address (`unix:/path`). The caller passes the configured value or its own
   * `KITTY_LISTEN_ON`; this module never reads the environment. Undefined: unavailable.
   */
  to?: string | undefined;
  /** The kitty binary (default `kitty` on PATH). */
  binary?: string | undefined;
  /** The longest one remote-control call may take (default 10 s). */
  timeoutMs?: number | undefined;
}

export class KittyBackend implements ConnectorBackend {
  readonly name = 'kitty' as const;
  private readonly client: KittyClient | null;
  private readonly runs = new Set<AbortController>();

  constructor(options: KittyBackendOptions = {}) {
    const to = options.to?.trim();
    this.client = to ? new KittyClient({ to, binary: options.binary, timeoutMs: options.timeoutMs }) : null;
  }

  async available(): Promise<{ ok: true } | { ok: false; reason: string }> {
    if (!this.client) {
      return {
        ok: false,
        reason: 'no kitty remote-control address (connector.kitty.to, or KITTY_LISTEN_ON)',
      };
    }
    const r = await this.client.remote(['ls']);
    if (r.spawnFailed)
      return { ok: false, reason: `kitty is not installed (${this.client.binary} not found)` };
    if (!r.ok) return { ok: false, reason: `kitty is not reachable at ${this.client.to}: ${kittyError(r)}` };
    try {
      parseLs(r.stdout);
    } catch {
      return {
        ok: false,
        reason: `kitty at ${this.client.to} answered ls with something that is not a window list`,
      };
    }
    return { ok: true };
  }

  async list(): Promise<Terminal[]> {
    return (await this.windows()).map((w) => w.terminal);
  }

  async read(terminal: Terminal, options: { lines: number; history: boolean }): Promise<ReadResult> {
    const window = await this.verify(terminal);
    const extent = options.history ? 'all' : 'screen';
    const r = await this.act(window, [
      'get-text',
      '--match',
      `id:${window.windowId}`,
      '--extent',
      extent,
      '--add-cursor',
    ]);
    const screen = screenWithCursor(r.stdout);
    const want = Math.max(0, options.lines);
    const lines = want === 0 ? [] : screen.lines.slice(-want);
    return { lines, truncated: screen.lines.length > lines.length, cursor: screen.cursor };
  }

  /**
   * kitty 0.26.5's `send-text` writes the bytes as they are (it has no `--bracketed-paste`, and the
   * listing does not say whether the program asked for bracketed paste): a newline in the text acts
   * as Enter. The caller has stripped every escape sequence, so the text cannot forge paste markers.
   */
  async sendText(terminal: Terminal, text: string): Promise<void> {
    if (text === '') return;
    // kitty 0.26.5 cannot paste bracketed: a newline would reach a shell as Enter and run what came
    // before it. Pressing Enter is the agent's to ask for, as a key.
    if (/[\n\r]/.test(text))
      throw new ConnectorError(
        'E_INVALID',
        'kitty cannot paste text with a newline as one paste (it would press Enter): send one line, then keys ["Enter"]',
      );
    await this.send(terminal, text);
  }

  /** kitty 0.26.5 has no `send-key`: each key is written as its terminal bytes (key-bytes.ts). */
  async sendKeys(terminal: Terminal, keys: readonly Key[]): Promise<void> {
    // All or nothing: a chord without bytes fails before anything is sent.
    const bytes = keys.map(keyBytes).join('');
    if (bytes === '') return;
    await this.send(terminal, bytes);
  }

  async run(terminal: Terminal, request: RunRequest, signal?: AbortSignal): Promise<RunResult> {
    if (request.where !== 'new-pane') {
      throw new ConnectorError(
        'E_PANE_BUSY',
        'kitty: running in an existing window is not supported (its prompt cannot be known); use where: new-pane',
      );
    }
    const window = await this.verify(terminal);
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) controller.abort();
    this.runs.add(controller);
    try {
      return await runInNewWindow(this.must(), window, request, controller.signal);
    } finally {
      this.runs.delete(controller);
      signal?.removeEventListener('abort', onAbort);
    }
  }

  async close(terminal: Terminal): Promise<void> {
    const window = await this.verify(terminal);
    await this.act(window, ['close-window', '--match', `id:${window.windowId}`]);
  }

  /** Stops the runs in flight: each closes its window (the command gets SIGHUP). */
  async dispose(): Promise<void> {
    for (const run of this.runs) run.abort();
  }

  private must(): KittyClient {
    if (!this.client) {
      throw new ConnectorError('E_BACKEND_UNAVAILABLE', 'kitty: no remote-control address configured');
    }
    return this.client;
  }

  private async windows(): Promise<KittyWindow[]> {
    const client = this.must();
    const r = await client.remote(['ls']);
    if (r.spawnFailed)
      throw new ConnectorError('E_BACKEND_UNAVAILABLE', `kitty is not installed (${client.binary})`);
    if (!r.ok) {
      throw new ConnectorError(
        'E_BACKEND_UNAVAILABLE',
        `kitty is not reachable at ${client.to}: ${kittyError(r)}`,
      );
    }
    return parseLs(r.stdout);
  }

  /** The terminal's window as listed now: same window id in the same kitty process, or E_TARGET_GONE. */
  private async verify(terminal: Terminal): Promise<KittyWindow> {
    const windowId = windowIdOf(terminal.id);
    if (terminal.backend !== 'kitty' || windowId === null) {
      throw new ConnectorError('E_TARGET_GONE', `not a kitty window: ${JSON.stringify(terminal.id)}`);
    }
    const found = (await this.windows()).find((w) => w.windowId === windowId);
    if (!found || found.terminal.identity !== terminal.identity) {
      throw new ConnectorError('E_TARGET_GONE', `kitty window ${windowId} is gone`);
    }
    return found;
  }

  /** One remote command on a verified window: kitty's "no matching window" is E_TARGET_GONE. */
  private async act(window: KittyWindow, args: string[], stdin?: string): Promise<KittyResult> {
    const r = await this.must().remote(args, stdin === undefined ? undefined : { stdin });
    if (r.ok) return r;
    if (/no matching/i.test(r.stderr)) {
      throw new ConnectorError('E_TARGET_GONE', `kitty window ${window.windowId} is gone`);
    }
    throw new ConnectorError('E_BACKEND_UNAVAILABLE', `kitty ${args[0]} failed: ${kittyError(r)}`);
  }

  /**
   * Text through stdin (`send-text --stdin`), never argv. `send-text` reports no match as success, so
   * the window is checked right before. It is not checked after: input that ends the program (`exit`,
   * `q`, C-d) closes the window, and that is a send that worked. A window that closes in the instant
   * between the check and the send gets nothing, and its id can name no other window.
   */
  private async send(terminal: Terminal, bytes: string): Promise<void> {
    const window = await this.verify(terminal);
    await this.act(window, ['send-text', '--match', `id:${window.windowId}`, '--stdin'], bytes);
  }
}
