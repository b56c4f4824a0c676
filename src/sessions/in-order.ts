/**
 * Writes started from a runner's synchronous callbacks (an event, the engine's pid, a permission
 * prompt), run one after another in the order they were asked, each awaited before the next: a
 * turn's events are stored in the order the engine sent them, whatever the store. A write that fails
 * is reported (`onError`) and the next runs all the same. An idle queue starts a write at once, in the
 * caller's step (a store that writes synchronously inside, as SQLite does, has written it on return).
 */
export class InOrder {
  private tail: Promise<void> = Promise.resolve();
  private queued = 0;

  constructor(private readonly onError: (what: string, error: unknown) => void) {}

  /** Run `write` after every write asked before it; `what` names it when it fails ("store a turn event"). */
  run(what: string, write: () => Promise<unknown>): void {
    const step = async (): Promise<void> => {
      try {
        await write();
      } catch (error) {
        this.onError(what, error);
      }
    };
    const started = this.queued === 0 ? step() : this.tail.then(step);
    this.queued += 1;
    const done = () => {
      this.queued -= 1;
    };
    // Never rejected (a throwing onError included): the next write runs whatever happened to this one.
    this.tail = started.then(done, done);
  }

  /** Resolves once every write asked so far has run. */
  drained(): Promise<void> {
    return this.tail;
  }
}
