/**
 * InOrder: the writes a runner's synchronous callbacks start (a turn's events) run one after another,
 * in the order asked, whatever each one takes; a failure is reported and the next runs anyway.
 */
import { describe, expect, it } from 'vitest';
import { InOrder } from '../../src/sessions/in-order.js';

const later = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('InOrder', () => {
  it('runs writes in the order asked, each after the one before it resolved', async () => {
    const writes = new InOrder(() => {});
    const log: string[] = [];
    // The first write is the slowest: a store that answers out of order must still write in order.
    for (const [i, ms] of [30, 0, 10, 0].entries()) {
      writes.run('write', async () => {
        log.push(`start ${i}`);
        await later(ms);
        log.push(`end ${i}`);
      });
    }
    await writes.drained();
    expect(log).toEqual(['start 0', 'end 0', 'start 1', 'end 1', 'start 2', 'end 2', 'start 3', 'end 3']);
  });

  it('starts a write at once when nothing is queued (a synchronous store has written it on return)', async () => {
    const writes = new InOrder(() => {});
    let written = false;
    writes.run('write', async () => {
      written = true;
    });
    expect(written).toBe(true);
    await writes.drained();
  });

  it('reports a failed write by name and runs the next', async () => {
    const failures: Array<[string, unknown]> = [];
    const writes = new InOrder((what, error) => failures.push([what, error]));
    const log: number[] = [];
    writes.run('store event 1', async () => {
      log.push(1);
    });
    writes.run('store event 2', async () => {
      throw new Error('disk full');
    });
    writes.run('store event 3', async () => {
      log.push(3);
    });
    await writes.drained();
    expect(log).toEqual([1, 3]);
    expect(failures).toEqual([['store event 2', new Error('disk full')]]);
  });

  it('drained() resolves at once when nothing was asked, and again after later writes', async () => {
    const writes = new InOrder(() => {});
    await writes.drained();
    const log: number[] = [];
    writes.run('write', async () => {
      await later(5);
      log.push(1);
    });
    await writes.drained();
    expect(log).toEqual([1]);
  });
});
