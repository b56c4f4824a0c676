import type { WebSocket } from 'ws';
import type { Logger } from '../../log/logger.js';
import { checkTarget, type Tmux } from '../../runners/tmux/tmux.js';
import type { TakeoverView } from '../protocol.js';
import { ControlClient } from './control-client.js';
import { FLOW_HIGH, FLOW_LOW, FLOW_PARK_MS, type FlowLimits, windowForTerminal } from './flow-rules.js';
import { type FreshSources, readFresh, repeatPoll } from './hub-poll.js';
import { spawnViewerPty, type ViewerPty } from './pty-viewer.js';
import { stopPid } from './stop.js';
import { CLOSE, type Role, Viewer, type ViewerHooks } from './viewer.js';
import { pinWindowSize, scrollback, type WindowSize, windowInfo } from './window.js';

/**
 * The console's live tmux terminals. Every viewer gets its own read-only tmux client on a pty; the
 * daemon, not tmux, decides who types: only a socket whose login took the session over (a writer)
 * has its keys (filtered of terminal reports) typed into the pane, through one control-mode client
 * per taken-over session, and only a writer resizes the window. The hub is the one place that knows
 * each held session's take over and window size: the API tells it of its own take overs and hand backs
 * (setTakeover), and a poll (hub-poll.ts) brings those made elsewhere.
 */

export interface TerminalHubOptions {
  tmux: Tmux;
  logger: Logger;
  /** The session's take over as the store has it now (null: none, or the session is not active). */
  takeoverOf(sessionId: string): Promise<TakeoverView | null>;
  limits?: { perSession?: number; total?: number; high?: number; low?: number; parkMs?: number };
}

export interface TerminalViewerInfo {
  sessionId: string;
  /** The tmux session's name (checked against tmux.ts's TARGET before use). */
  target: string;
  /** The login's public id: a writer when it is the takeover's principal. */
  principal: string;
  takeover: TakeoverView | null;
}

export interface ViewerStats {
  sessionId: string;
  principal: string;
  role: Role;
  sent: number;
  acked: number;
  buffered: number;
  paused: boolean;
  /** Its tmux client ended while its browser does not read (it still counts as a viewer). */
  parked: boolean;
  bad: number;
  ignored: number;
}

interface Link {
  control: ControlClient;
  paneId: string;
}

interface Entry {
  sessionId: string;
  target: string;
  takeover: TakeoverView | null;
  viewers: Set<Viewer>;
  /** The writer's control client, made on first use while the session is taken over. */
  link: Promise<Link | null> | null;
  /** Counts links made and ended: a link made for an earlier takeover is no longer the session's. */
  generation: number;
  /** Status lines under the window (rows of a client = window rows + these). */
  status: number;
  pinned: boolean;
  /** The latest size a writer asked for, applied one at a time. */
  wantSize: { cols: number; rows: number } | null;
  resizing: boolean;
  /** Counts setTakeover calls: a poll begun before one brings an older word, dropped. */
  takeoverSeq: number;
  /** Counts a writer's resize runs: a poll begun before one brings an older size, dropped. */
  sizeSeq: number;
  poll: { stop(): void };
}

const roleOf = (principal: string, takeover: TakeoverView | null): Role =>
  takeover?.principal != null && takeover.principal === principal ? 'writer' : 'viewer';

const sameTakeover = (a: TakeoverView | null, b: TakeoverView | null): boolean =>
  a === b || (!!a && !!b && a.by === b.by && a.since === b.since && a.principal === b.principal);

export class TerminalHub {
  private readonly tmux: Tmux;
  private readonly logger: Logger;
  private readonly fresh: FreshSources;
  private readonly perSession: number;
  private readonly total: number;
  private readonly flow: FlowLimits;
  private readonly sessions = new Map<string, Entry>();
  private readonly entries = new Map<Viewer, Entry>();
  /** Every pty and control client started, until it exits: close() ends each by pid. */
  private readonly live = new Set<{
    pid: number | undefined;
    exited: Promise<void>;
    signal: NodeJS.Signals;
  }>();
  private viewerCount = 0;
  private closing = false;
  private readonly hooks: ViewerHooks;

  constructor(options: TerminalHubOptions) {
    this.tmux = options.tmux;
    this.logger = options.logger;
    this.fresh = { tmux: options.tmux, logger: options.logger, takeoverOf: options.takeoverOf };
    this.perSession = options.limits?.perSession ?? 16;
    this.total = options.limits?.total ?? 256;
    this.flow = {
      high: options.limits?.high ?? FLOW_HIGH,
      low: options.limits?.low ?? FLOW_LOW,
      parkMs: options.limits?.parkMs ?? FLOW_PARK_MS,
    };
    this.hooks = {
      input: (viewer, keys) => this.typed(viewer, keys),
      resize: (viewer, cols, rows) => this.resized(viewer, cols, rows),
      gone: (viewer) => this.forget(viewer),
      reattach: (viewer) => this.reattach(viewer),
    };
  }

  /** A new viewer on an accepted, authenticated WebSocket. */
  attach(socket: WebSocket, viewer: TerminalViewerInfo): void {
    if (this.closing) return void socket.close(CLOSE.goingAway, 'the daemon is stopping');
    try {
      checkTarget(viewer.target);
    } catch {
      return void socket.close(CLOSE.notFound, 'not a tmux session');
    }
    const entry = this.sessions.get(viewer.sessionId);
    // Counted before anything asynchronous, so a burst of connections cannot pass the caps together.
    if (this.viewerCount >= this.total || (entry?.viewers.size ?? 0) >= this.perSession) {
      return void socket.close(CLOSE.tooMany, 'too many viewers');
    }
    // The take over the server read before this attach may be older than the hub's (a hand back
    // committed meanwhile): it never touches the other viewers. A held session keeps the hub's word;
    // only a session new to the hub starts from it, and its next poll corrects it.
    const session = entry ?? this.newEntry(viewer);
    const role = roleOf(viewer.principal, session.takeover);
    const v = new Viewer(socket, viewer.principal, role, this.flow, this.hooks, this.logger);
    session.viewers.add(v);
    this.entries.set(v, session);
    this.viewerCount++;
    void this.open(session, v).catch((error: unknown) => {
      this.logger.warn('console terminal failed to open', { sessionId: session.sessionId, error });
      v.end(CLOSE.error, 'the terminal could not be opened');
    });
  }

  /** Take over / hand back happened: make the principal's sockets of this session writers (null: everyone views). */
  setTakeover(sessionId: string, takeover: TakeoverView | null): void {
    const entry = this.sessions.get(sessionId);
    if (!entry) return;
    // Newer than whatever a poll in flight read: its answer is dropped.
    entry.takeoverSeq++;
    this.applyTakeover(entry, takeover);
  }

  private applyTakeover(entry: Entry, takeover: TakeoverView | null): void {
    const before = entry.takeover?.principal ?? null;
    entry.takeover = takeover;
    if ((takeover?.principal ?? null) !== before) this.unlink(entry);
    for (const v of entry.viewers) v.setRole(roleOf(v.principal, takeover), takeover);
  }

  /** The session ended: close its viewers with this reason. */
  closeSession(sessionId: string, reason: string): void {
    const entry = this.sessions.get(sessionId);
    if (!entry) return;
    for (const v of [...entry.viewers]) v.end(CLOSE.gone, reason, true);
    this.drop(entry);
  }

  counts(): { viewers: number; sessions: number } {
    return { viewers: this.viewerCount, sessions: this.sessions.size };
  }

  /** Each socket's state (for health checks, tests and the bench): its flow and its bad frames. */
  stats(): ViewerStats[] {
    return [...this.entries].map(([v, entry]) => ({
      sessionId: entry.sessionId,
      principal: v.principal,
      role: v.role,
      sent: v.flowState.sent,
      acked: v.flowState.acked,
      buffered: v.flowState.buffered,
      paused: v.flowState.paused,
      parked: v.parked,
      bad: v.bad,
      ignored: v.ignored,
    }));
  }

  /** Ends every pty and control client it started (by pid), and closes every socket. */
  async close(): Promise<void> {
    this.closing = true;
    for (const entry of [...this.sessions.values()]) {
      for (const v of [...entry.viewers]) v.end(CLOSE.goingAway, 'the daemon is stopping');
      this.drop(entry);
    }
    await Promise.all([...this.live].map((p) => stopPid(p.pid, p.exited, p.signal)));
  }

  private newEntry(viewer: TerminalViewerInfo): Entry {
    const entry: Entry = {
      sessionId: viewer.sessionId,
      target: viewer.target,
      takeover: viewer.takeover,
      viewers: new Set(),
      link: null,
      generation: 0,
      status: 1,
      pinned: false,
      wantSize: null,
      resizing: false,
      takeoverSeq: 0,
      sizeSeq: 0,
      poll: { stop: () => {} },
    };
    entry.poll = repeatPoll(() => this.poll(entry), this.logger);
    this.sessions.set(viewer.sessionId, entry);
    return entry;
  }

  /** The session is no longer held: its control client and its poll go. */
  private drop(entry: Entry): void {
    this.unlink(entry);
    entry.poll.stop();
    if (this.sessions.get(entry.sessionId) === entry) this.sessions.delete(entry.sessionId);
  }

  /** The store's take over and tmux's window size, applied unless a newer word came meanwhile. */
  private async poll(entry: Entry): Promise<void> {
    const takeoverSeq = entry.takeoverSeq;
    const sizeSeq = entry.sizeSeq;
    const found = await readFresh(this.fresh, entry.sessionId, entry.target);
    if (this.closing || this.sessions.get(entry.sessionId) !== entry) return;
    const takeover = found.takeover;
    if (
      takeover !== undefined &&
      entry.takeoverSeq === takeoverSeq &&
      !sameTakeover(entry.takeover, takeover)
    )
      this.applyTakeover(entry, takeover);
    // A writer's resize in flight (or done since) knows better: applySizes tells every viewer.
    if (found.size && entry.sizeSeq === sizeSeq && !entry.resizing) this.followWindow(entry, found.size);
    // No size: if the session is gone, a parked viewer (no tmux client to exit) would hold its slot.
    if (!found.size && (await this.tmux.paneState(entry.target)).state === 'gone')
      this.closeSession(entry.sessionId, 'the tmux session ended');
  }

  /** The window was resized by someone else (a turn's keepWindowSize, tmux by hand): every client follows. */
  private followWindow(entry: Entry, size: WindowSize): void {
    entry.status = size.status;
    for (const v of entry.viewers) v.follow(size.cols, size.rows + size.status);
  }

  private async open(entry: Entry, v: Viewer): Promise<void> {
    if (!entry.pinned) entry.pinned = await pinWindowSize(this.tmux, entry.target);
    const info = await windowInfo(this.tmux, entry.target);
    if (v.closed) return;
    if (!info) return v.end(CLOSE.notFound, 'the tmux session is not there');
    entry.status = info.status;
    const size = { cols: info.cols, rows: info.rows + info.status };
    const history = await scrollback(this.tmux, entry.target, { rows: size.rows, history: info.history });
    if (v.closed || this.closing) return;
    const pty = await this.spawn(entry, size);
    if (pty) v.start(pty, size, history, entry.takeover);
  }

  /** A parked viewer reads again: a new client of the window as it is now (its session may be gone). */
  private reattach(v: Viewer): void {
    const entry = this.entryOf(v);
    if (!entry) return;
    const again = async () => {
      const info = await windowInfo(this.tmux, entry.target);
      if (v.closed || this.closing) return;
      if (!info) return v.end(CLOSE.gone, 'the tmux session ended', true);
      entry.status = info.status;
      const size = { cols: info.cols, rows: info.rows + info.status };
      const pty = await this.spawn(entry, size);
      if (pty) v.reattached(pty, size);
    };
    void again().catch((error: unknown) => {
      this.logger.warn('console terminal failed to re-attach', { sessionId: entry.sessionId, error });
      v.end(CLOSE.error, 'the terminal could not be opened', true);
    });
  }

  /** A viewer's client, tracked until it exits (close() ends it by pid); none once closing. */
  private async spawn(entry: Entry, size: { cols: number; rows: number }): Promise<ViewerPty | null> {
    const pty = await spawnViewerPty(this.tmux, entry.target, size);
    this.track(pty.pid, new Promise<void>((resolve) => pty.onExit(() => resolve())), 'SIGHUP');
    if (!this.closing) return pty;
    pty.kill('SIGHUP');
    return null;
  }

  private track(pid: number | undefined, exited: Promise<void>, signal: NodeJS.Signals): void {
    const item = { pid, exited, signal };
    this.live.add(item);
    void exited.then(() => this.live.delete(item));
  }

  private forget(v: Viewer): void {
    const entry = this.entries.get(v);
    if (!entry) return;
    this.entries.delete(v);
    entry.viewers.delete(v);
    this.viewerCount--;
    if (entry.viewers.size === 0 && this.sessions.get(entry.sessionId) === entry) this.drop(entry);
  }

  /** The writer's control client: one per taken-over session, made on first use. */
  private linkOf(entry: Entry): Promise<Link | null> {
    if (entry.link) return entry.link;
    const generation = ++entry.generation;
    const link = this.makeLink(entry, generation);
    entry.link = link;
    void link.then((l) => {
      if (!l && entry.generation === generation) entry.link = null;
    });
    return link;
  }

  private async makeLink(entry: Entry, generation: number): Promise<Link | null> {
    const info = await windowInfo(this.tmux, entry.target);
    // Handed back (or ended) while we asked: no client.
    if (!info || entry.generation !== generation || this.closing) return null;
    const control = new ControlClient(this.tmux, entry.target, this.logger);
    this.track(control.pid, control.exited, 'SIGTERM');
    // Its session gone, or tmux's server: the next keys start a new one (or find nothing).
    void control.exited.then(() => {
      if (entry.generation === generation) entry.link = null;
    });
    return { control, paneId: info.paneId };
  }

  /** Hand back (or the session's end): the control client goes. */
  private unlink(entry: Entry): void {
    const link = entry.link;
    entry.generation++;
    entry.link = null;
    void link?.then((l) => l?.control.close());
  }

  private typed(v: Viewer, keys: string): void {
    const entry = this.entryOf(v);
    if (!entry || v.role !== 'writer') return;
    const bytes = Buffer.from(keys, 'utf8');
    void this.linkOf(entry).then(async (link) => {
      // Checked again after the wait: a hand back in between ends the typing.
      if (!link || v.role !== 'writer' || v.closed) return;
      if (!(await link.control.sendKeys(link.paneId, bytes))) {
        this.logger.warn('console: keys not delivered to the pane', { sessionId: entry.sessionId });
      }
    });
  }

  private resized(v: Viewer, cols: number, rows: number): void {
    const entry = this.entryOf(v);
    if (!entry || v.role !== 'writer') return;
    const size = windowForTerminal(cols, rows, entry.status);
    if (!size) return;
    entry.wantSize = size;
    if (!entry.resizing) void this.applySizes(entry);
  }

  /** The writer's sizes, latest first, one at a time; every viewer's client follows the window. */
  private async applySizes(entry: Entry): Promise<void> {
    entry.resizing = true;
    try {
      for (let size = entry.wantSize; size; size = entry.wantSize) {
        entry.wantSize = null;
        const link = await this.linkOf(entry);
        if (!link || !(await link.control.resizeWindow(size.cols, size.rows))) continue;
        const info = await windowInfo(this.tmux, entry.target);
        if (!info) continue;
        entry.status = info.status;
        for (const v of entry.viewers) v.resize(info.cols, info.rows + info.status);
      }
    } finally {
      entry.resizing = false;
      entry.sizeSeq++;
    }
  }

  private entryOf(v: Viewer): Entry | undefined {
    return this.entries.get(v);
  }
}
