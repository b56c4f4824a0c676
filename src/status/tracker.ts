import type { TurnEvent } from '../core/events.js';
import type { GitHubWrites } from '../core/ports/github.js';
import type { StatusPatch, StatusStore } from '../core/ports/github-status.js';
import type { AnswerTarget } from '../core/ports/inbox.js';
import type { RenderedStatus, StatusFacts, TodoItem } from '../core/status-facts.js';
import type { Logger } from '../log/logger.js';
import type { LiveFacts } from './gather.js';
import { describe, repoOf, type SayDeps, sayCheck, sayComment, sayReaction, statusOf } from './say.js';
import { isFinal } from './write-rules.js';

/**
 * Tells GitHub about each delivery that runs a turn (issue 18): the eyes reaction, one tracking
 * comment edited in place (queued → running → held → finished), and on a pull request a check run
 * (App) or a commit status (token). It renders whatever the stores say now, so the edit after a
 * restart finishes what a crash left "running". Edits of one comment are at most one per
 * `editIntervalMs`; the client paces all writes and waits out rate limits. GitHub failing never
 * touches the turn: each failure is a log line and the row's `lastError`.
 */
export interface StatusSettings {
  reactions: boolean;
  comments: boolean;
  checks: boolean;
  replyToRejections: boolean;
  editIntervalMs: number;
  /** A running comment with no other news is refreshed this often (its elapsed time). */
  tickMs: number;
  checkName: string;
}

export interface TodoFollower {
  push(event: TurnEvent): boolean;
  readonly items: TodoItem[];
}

export interface TrackerDeps {
  github: GitHubWrites;
  store: StatusStore;
  gather(deliveryId: string, live: LiveFacts): Promise<StatusFacts | undefined>;
  /** Where a delivery is answered (its stored plan's answer target); undefined: nowhere (made by hand). */
  answerOf(deliveryId: string): Promise<AnswerTarget | undefined>;
  /** Queued deliveries of a work item (their place in line changed). */
  queuedOf(workItem: string): Promise<string[]>;
  render(facts: StatusFacts): RenderedStatus;
  followTodos(): TodoFollower;
  settings: StatusSettings;
  logger: Logger;
  now?: () => number;
}

interface Entry {
  timer: NodeJS.Timeout | undefined;
  /** When the armed timer fires (ms): a change sooner than that re-arms it (a running tick is long). */
  due: number;
  /** The armed timer is a running turn's tick, not news. */
  ticking: boolean;
  run: Promise<void> | undefined;
  again: boolean;
  lastWrite: number;
  todos: TodoFollower | undefined;
  /** The check's last state written (status, conclusion, title): the summary alone is not re-sent. */
  checkDigest: string | undefined;
  /** The phase last rendered: a turn's first event moves a comment still saying queued to running. */
  phase: StatusFacts['phase'] | undefined;
  /** Failures in a row (GitHub unreachable, a store error): the next try backs off. */
  failures: number;
  /** The comment was refused for good (403/404/410): not tried again for this delivery. */
  commentRefused: boolean;
}

const MAX_BACKOFF_MS = 5 * 60_000;

export class StatusTracker {
  private readonly entries = new Map<string, Entry>();
  private stopped = false;
  /** Stopping: edits are made at once (no interval), until stop() ends. */
  private stopping = false;
  private readonly now: () => number;
  private readonly say: SayDeps;

  constructor(private readonly deps: TrackerDeps) {
    this.now = deps.now ?? Date.now;
    this.say = {
      github: deps.github,
      settings: deps.settings,
      logger: deps.logger,
      now: this.now,
      keep: (id, patch) => deps.store.update(id, patch),
    };
  }

  /** A delivery was accepted: a turn to track, or a refusal to explain to a person with standing. */
  arrived(
    deliveryId: string,
    routed: {
      action: string;
      workItem?: string | undefined;
      reason?: string;
      answer?: AnswerTarget | undefined;
    },
  ): void {
    if (!routed.answer || !routed.workItem) return;
    if (routed.action === 'start' || routed.action === 'deliver') {
      const workItem = routed.workItem;
      // Tracked even while stopping: the next daemon's recover() finds the row and says it all.
      void this.deps.store
        .track(deliveryId, workItem)
        .then(() => this.changed(deliveryId))
        .catch((error: unknown) =>
          this.deps.logger.warn('GitHub status: could not start tracking a delivery', {
            delivery: deliveryId,
            error,
          }),
        );
    } else if (routed.action === 'reject' && this.deps.settings.replyToRejections && !this.stopped) {
      void this.replyRefused(deliveryId, routed.answer, routed.reason ?? 'refused');
    }
  }

  /** Something about the delivery changed (claimed, finished, held, queued again). */
  changed(deliveryId: string): void {
    if (this.stopped) return;
    const e = this.entry(deliveryId);
    if (e.run) {
      e.again = true;
      return;
    }
    const wait = this.stopping
      ? 0
      : Math.max(0, e.lastWrite + this.deps.settings.editIntervalMs - this.now());
    if (e.timer) {
      // Already due as soon as the interval allows: nothing to do. Armed for a running tick: sooner.
      if (this.now() + wait >= e.due) return;
      clearTimeout(e.timer);
    }
    this.arm(deliveryId, e, wait);
  }

  /** Deliveries of this work item moved up in line. */
  workItemChanged(workItem: string): void {
    if (this.stopped) return;
    this.deps
      .queuedOf(workItem)
      .then((ids) => {
        for (const id of ids) if (this.entries.has(id)) this.changed(id);
      })
      .catch((error: unknown) =>
        this.deps.logger.debug('GitHub status: could not list a line', { workItem, error }),
      );
  }

  /** A running delivery's turn event: its checklist, and acts it may have made. */
  event(deliveryId: string, event: TurnEvent): void {
    if (this.stopped) return;
    const e = this.entries.get(deliveryId);
    if (!e) return;
    e.todos ??= this.deps.followTodos();
    const todos = e.todos.push(event);
    // The turn began after the last render (a claim is written before its turn starts): say running.
    const started = e.phase !== 'running';
    if (started || todos || event.type === 'tool-result' || event.type === 'attention')
      this.changed(deliveryId);
  }

  /** After a start: finish what an earlier daemon left unsaid (a crash's "running" comment). */
  async recover(): Promise<number> {
    const rows = await this.deps.store.unfinished(1000);
    for (const row of rows) this.changed(row.deliveryId);
    return rows.length;
  }

  /**
   * Stop: what is waiting for its edit interval is written now (a shutdown's "runs again", a final
   * state), within `graceMs`; then nothing more is written.
   */
  async stop(graceMs = 10_000): Promise<void> {
    const deadline = this.now() + graceMs;
    this.stopping = true;
    // Until nothing is left to say or the grace is spent: what waits is written now, and what an
    // edit in flight learned meanwhile (`again`) is written right after it.
    for (;;) {
      for (const [id, e] of this.entries) {
        // A running turn's tick has no news (a TUI left running in tmux), and one that just failed
        // waits out its backoff (GitHub is failing): neither is worth the grace.
        if (!e.timer || e.run || e.ticking || e.failures > 0) continue;
        clearTimeout(e.timer);
        e.timer = undefined;
        this.start(id, e);
      }
      const runs = [...this.entries.values()].map((e) => e.run).filter((r) => r !== undefined);
      const left = deadline - this.now();
      if (runs.length === 0 || left <= 0) break;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled(runs),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, left);
          timer.unref();
        }),
      ]);
      clearTimeout(timer);
    }
    this.stopped = true;
    for (const e of this.entries.values()) clearTimeout(e.timer);
    this.entries.clear();
  }

  private entry(id: string): Entry {
    let e = this.entries.get(id);
    if (!e) {
      e = {
        timer: undefined,
        due: 0,
        ticking: false,
        run: undefined,
        again: false,
        lastWrite: 0,
        todos: undefined,
        checkDigest: undefined,
        phase: undefined,
        failures: 0,
        commentRefused: false,
      };
      this.entries.set(id, e);
    }
    return e;
  }

  private arm(id: string, e: Entry, waitMs: number, ticking = false): void {
    e.due = this.now() + waitMs;
    e.ticking = ticking;
    e.timer = setTimeout(() => {
      e.timer = undefined;
      this.start(id, e);
    }, waitMs);
    e.timer.unref();
  }

  private start(id: string, e: Entry): void {
    e.run = this.refresh(id, e)
      .then((next) => {
        e.failures = 0;
        return next;
      })
      .catch((error: unknown) => {
        e.failures++;
        // Never given up (a give-up would leave "running" for good); said at 1, 2, 4, 8… failures.
        if ((e.failures & (e.failures - 1)) === 0)
          this.deps.logger.warn('GitHub status: could not update; trying again later', {
            delivery: id,
            attempt: e.failures,
            error: describe(error),
          });
        return 'retry' as const;
      })
      .then((next) => {
        e.run = undefined;
        if (this.stopped) return;
        if (next === 'done') {
          if (!e.again) this.entries.delete(id);
          else this.changed(id);
          return;
        }
        if (e.again || next === 'retry') {
          e.again = false;
          const backoff = next === 'retry' ? Math.min(MAX_BACKOFF_MS, 1000 * 2 ** e.failures) : 0;
          const interval = this.stopping ? 0 : e.lastWrite + this.deps.settings.editIntervalMs - this.now();
          const wait = Math.max(backoff, interval);
          this.arm(id, e, wait);
          return;
        }
        // Running: its elapsed time and checklist are refreshed now and then with no other news.
        if (next === 'running')
          this.arm(id, e, Math.max(this.deps.settings.tickMs, this.deps.settings.editIntervalMs), true);
      });
  }

  /** One refresh: react (once), the comment, the check. What it wrote is saved with the row. */
  private async refresh(id: string, e: Entry): Promise<'done' | 'running' | 'idle'> {
    const { store, settings } = this.deps;
    const row = await store.get(id);
    if (!row) return 'done';
    const answer = await this.deps.answerOf(id);
    const facts = answer ? await this.deps.gather(id, { todos: e.todos?.items }) : undefined;
    if (!answer || !facts) {
      // Its plan or its record is gone (retention): nothing more can be said; not asked again.
      if (!row.final)
        await store.update(id, { final: true, lastError: 'the delivery or its plan is gone (retention?)' });
      return 'done';
    }
    if (row.final) {
      if (isFinal(facts.phase)) return 'done';
      // Run again (`events retry`): a new life for the same comment, and a new check run.
      Object.assign(row, { final: false, digest: null, checkRunId: null, checkSha: null });
      e.checkDigest = undefined;
      e.commentRefused = false;
      await store.update(id, { final: false, digest: null, checkRunId: null, checkSha: null });
    }
    const repo = repoOf(answer);
    const patch: StatusPatch = {};
    if (!row.reacted) {
      if (settings.reactions && answer.react) await sayReaction(this.say, id, repo, answer, patch);
      patch.reacted = true;
    }
    e.phase = facts.phase;
    const rendered = this.deps.render(facts);
    if (settings.comments && !e.commentRefused)
      await sayComment(this.say, id, isFinal(facts.phase), e, repo, answer, row, rendered, patch);
    if (settings.checks && answer.pull)
      await sayCheck(this.say, id, e, repo, answer, row, facts, rendered, patch);
    const final = isFinal(facts.phase);
    patch.phase = facts.phase === 'rejected' ? 'finished' : facts.phase;
    if (final) patch.final = true;
    await store.update(id, patch);
    return final ? 'done' : facts.phase === 'running' ? 'running' : 'idle';
  }

  /** A person with standing is told, once, why their trigger was refused. */
  private async replyRefused(id: string, answer: AnswerTarget, reason: string): Promise<void> {
    const body = this.deps.render({
      workItem: `${answer.repository}#${answer.number}`,
      deliveryId: id,
      consoleUrl: undefined,
      sessionId: undefined,
      now: new Date(this.now()).toISOString(),
      phase: 'rejected',
      reason,
    }).body;
    try {
      await this.deps.github.createComment(repoOf(answer), answer.number, body);
    } catch (error) {
      this.deps.logger.warn('GitHub status: could not say why a trigger was refused', {
        delivery: id,
        status: statusOf(error),
        error: describe(error),
      });
    }
  }
}
