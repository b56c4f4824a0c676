/**
 * The inbox listener against PostgreSQL: a NOTIFY on the inbox's channel wakes it, and a connection
 * the server drops is made again (with back-off) and listens on.
 */
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { INBOX_CHANNEL, InboxListener } from '../../src/hosts/listener.js';
import { nullLogger } from '../../src/log/logger.js';
import { freshDatabase } from '../helpers/postgres.js';

let url: string;
let drop: () => Promise<void>;
let admin: pg.Client;
let listener: InboxListener | undefined;

beforeEach(async () => {
  const database = await freshDatabase();
  url = database.url;
  drop = database.drop;
  admin = new pg.Client({ connectionString: url });
  await admin.connect();
});

afterEach(async () => {
  await listener?.stop();
  listener = undefined;
  await admin.end();
  await drop();
});

const sleep = (ms: number) => new Promise((go) => setTimeout(go, ms));
async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await sleep(25);
  }
}

describe('InboxListener', () => {
  it('wakes on a notification of its channel, and listens again after its connection is cut', async () => {
    const onNotify = vi.fn();
    listener = new InboxListener({
      client: () => new pg.Client({ connectionString: url, application_name: 'loop-listener-test' }),
      onNotify,
      logger: nullLogger,
      minDelayMs: 50,
    });
    await listener.start();
    expect(listener.listening()).toBe(true);
    // One wake-up on connecting (what was notified while it was not listening).
    expect(onNotify).toHaveBeenCalledTimes(1);
    await admin.query(`NOTIFY ${INBOX_CHANNEL}`);
    await admin.query('NOTIFY some_other_channel');
    await until(() => onNotify.mock.calls.length === 2);
    await admin.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'loop-listener-test'",
    );
    await until(() => onNotify.mock.calls.length === 3 && listener?.listening() === true);
    await admin.query(`NOTIFY ${INBOX_CHANNEL}`);
    await until(() => onNotify.mock.calls.length === 4);
  });
});
