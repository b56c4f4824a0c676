/**
 * The webhook fault test (issue 3, invariant 5: nothing accepted is lost or done twice).
 *
 * 2,000 signed deliveries across 50 work items from 8 concurrent senders — 20% sent twice, 5% with
 * bad signatures — to a real `the-loop serve` child process that is SIGKILLed twice at random points
 * and restarted on the same port. Senders behave like GitHub redelivery: a request that fails with a
 * connection error is sent again, same id, same bytes, until it gets an HTTP answer. Afterwards the
 * registry and the fake engine's log must show every valid delivery stored once, run once to
 * success, in arrival order per work item; no bad-signature delivery stored or run.
 *
 * Set FAULT_SEED to replay a plan (timing still varies: the kills land wherever they land),
 * FAULT_TOTAL for a shorter local run, FAULT_KEEP=1 to keep the temp dir (registry, logs, engine log).
 */
import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { routeEvent } from '../../src/github/route.js';
import { createApp, createDispatcher } from '../../src/main.js';
import type { Runner, RunOutcome } from '../../src/runners/runner.js';
import { pidAlive } from '../helpers/cli.js';
import {
  type Answer,
  CONCURRENCY,
  type Delivery,
  DRAIN_MS,
  deliver,
  type EngineLine,
  engineAlive,
  faultConfig,
  freePort,
  ITEMS,
  KILLS,
  makePlan,
  payloadFor,
  REPO,
  SEND_PHASE_MS,
  SENDERS,
  type Stats,
  Supervisor,
  sleep,
  TOTAL,
  waitFor,
} from './fault-harness.js';

/** Assert a list of problems is empty, showing how many there are and the first ten. */
const expectNone = <T>(problems: T[]) =>
  expect({ count: problems.length, first: problems.slice(0, 10) }).toEqual({ count: 0, first: [] });

describe('webhook fault test: SIGKILLs, redeliveries, duplicates and bad signatures', () => {
  let root: string | undefined;
  let supervisor: Supervisor | undefined;
  let engineLog = '';
  let reader: Database.Database | undefined;

  afterAll(() => {
    supervisor?.killAll();
    if (reader?.open) reader.close();
    // Any engine still around is a leak the test reports; it is ours, so stop it by pid.
    if (engineLog && existsSync(engineLog)) {
      for (const line of readFileSync(engineLog, 'utf8').split('\n')) {
        if (!line) continue;
        const { pid } = JSON.parse(line) as EngineLine;
        if (engineAlive(pid)) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // Gone.
          }
        }
      }
    }
    if (root && process.env.FAULT_KEEP) console.log(`kept ${root}`);
    else if (root) rmSync(root, { recursive: true, force: true });
  });

  it('stores every valid delivery once, runs each once, in arrival order, across two SIGKILLs', async () => {
    const t0 = Date.now();
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-fault-'));
    root = dir;
    const seed = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
    const plan = makePlan(seed);
    const valid = plan.filter((d) => !d.bad);
    const bad = plan.filter((d) => d.bad);
    const byId = new Map(plan.map((d) => [d.id, d]));
    const kPerItem = new Map<number, number>();
    for (const d of valid) kPerItem.set(d.item, Math.max(kPerItem.get(d.item) ?? 0, d.n));

    const repoDir = join(dir, 'widgets');
    mkdirSync(repoDir);
    engineLog = join(dir, 'engine.log');
    writeFileSync(engineLog, '');
    const configPath = join(dir, 'config.yaml');
    const port = await freePort();
    writeFileSync(configPath, stringify(faultConfig(repoDir, port, engineLog)));
    const dbPath = join(dir, 'data', 'the-loop.db');
    const env = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? dir,
      XDG_STATE_HOME: process.env.XDG_STATE_HOME ?? join(dir, 'state'),
      LANG: 'C.UTF-8',
      THE_LOOP_CONFIG: configPath,
    };
    supervisor = new Supervisor(dir, env, port);
    const sup = supervisor;
    await sup.start();
    const db = new Database(dbPath, { readonly: true, fileMustExist: true });
    reader = db;
    db.pragma('busy_timeout = 5000');
    const count = (sql: string) => (db.prepare(sql).get() as { n: number }).n;

    const stats: Stats = { requests: 0, connectionErrors: 0, unavailable: 0, answers: new Map() };
    let firstSendsDone = 0;
    const dupTasks: Promise<Answer>[] = [];

    // Each sender owns its work items, so a work item's deliveries go out in n order from one place,
    // each only after the previous one was answered: arrival order is send order.
    const sender = async (index: number) => {
      for (const d of plan.filter((p) => p.sender === index)) {
        if (d.dup) {
          // The same delivery again, later — sometimes right away, racing the original.
          const delay = Math.random() < 0.3 ? Math.random() * 5 : 5 + Math.random() * 3000;
          dupTasks.push(sleep(delay).then(() => deliver(port, d, stats)));
        }
        await deliver(port, d, stats);
        firstSendsDone += 1;
      }
    };

    // The chaos: two SIGKILLs at random points of the sending, each followed by a restart.
    const inFlightAtKill: number[] = [];
    const killPoints = [
      Math.floor(TOTAL * (0.1 + Math.random() * 0.3)),
      Math.floor(TOTAL * (0.5 + Math.random() * 0.4)),
    ];
    const chaos = async () => {
      for (const point of killPoints) {
        await waitFor(() => firstSendsDone >= point, SEND_PHASE_MS, `${point} deliveries sent`);
        await sup.settled();
        await sleep(100 + Math.random() * 400);
        await sup.kill(() =>
          inFlightAtKill.push(count("SELECT COUNT(*) AS n FROM turns WHERE status = 'running'")),
        );
      }
    };

    // A failed restart fails the test at once instead of leaving the senders retrying.
    await Promise.all([chaos(), ...Array.from({ length: SENDERS }, (_, i) => sender(i))]);
    await Promise.all(dupTasks);
    const sentAt = Date.now();
    expect(sup.kills).toBe(KILLS);

    // Drain: the daemon works off what it accepted (restarted if it is not running).
    await sup.settled();
    if (sup.current?.exitedAt !== undefined) await sup.restart();
    // Every sender has its answer, so everything accepted is in the inbox by now.
    await waitFor(
      () => count("SELECT COUNT(*) AS n FROM deliveries WHERE status IN ('queued', 'running')") === 0,
      DRAIN_MS,
      'the inbox to drain',
      250,
    ).catch((error: Error) => {
      const byStatus = db.prepare('SELECT status, COUNT(*) AS n FROM deliveries GROUP BY status').all();
      throw new Error(`${error.message}: ${JSON.stringify(byStatus)}`);
    });
    const drainedAt = Date.now();
    const stopped = await sup.stop();
    const lastStdout = sup.current?.stdout ?? '';

    // --- The evidence ---
    const deliveries = db
      .prepare('SELECT id, seq, status, route, work_item, turn_id, error FROM deliveries ORDER BY seq')
      .all() as {
      id: string;
      seq: number;
      status: string;
      route: string | null;
      work_item: string | null;
      turn_id: number | null;
      error: string | null;
    }[];
    const turns = db
      .prepare(
        'SELECT id, session_id, seq, status, end_reason, delivery_id, pid, error FROM turns ORDER BY id',
      )
      .all() as {
      id: number;
      session_id: string;
      seq: number;
      status: string;
      end_reason: string | null;
      delivery_id: string | null;
      pid: number | null;
      error: string | null;
    }[];
    const sessions = db.prepare('SELECT id, work_item FROM sessions').all() as {
      id: string;
      work_item: string;
    }[];
    db.close();
    const logLines = readFileSync(engineLog, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as EngineLine);

    const lost = turns.filter((t) => t.end_reason === 'lost');
    const duplicatesSent = plan.filter((d) => d.dup).length;
    const wall = (Date.now() - t0) / 1000;
    console.log(
      `webhook fault: seed ${seed} · ${plan.length} deliveries sent (${valid.length} valid) · ${duplicatesSent} duplicates · ${bad.length} bad signatures · ${stats.requests} requests, ${stats.connectionErrors} connection errors retried, ${stats.unavailable} 503s · ${sup.kills} kills (turns in flight: ${inFlightAtKill.join(', ')}) · ${lost.length} lost turns re-run · ${turns.length} turns, ${logLines.length} engine runs · send ${((sentAt - t0) / 1000).toFixed(1)} s, drain ${((drainedAt - sentAt) / 1000).toFixed(1)} s, wall ${wall.toFixed(1)} s`,
    );

    expect(sup.unexpectedExits).toEqual([]);
    expect(stopped).toEqual({ code: 0, signal: null });
    expect(lastStdout).toContain('Stopped.');

    // Every answer was one of the expected ones.
    const wrongAnswers: string[] = [];
    for (const d of plan) {
      const answers = stats.answers.get(d.id) ?? [];
      expect(answers.length).toBe(d.dup ? 2 : 1);
      for (const a of answers) {
        const ok = d.bad
          ? a.status === 401
          : (a.status === 202 && a.text === 'accepted') || (a.status === 200 && a.text === 'duplicate');
        if (!ok) wrongAnswers.push(`${d.id} (${d.bad ? 'bad' : 'valid'}): ${a.status} ${a.text}`);
      }
    }
    expectNone(wrongAnswers);

    // Every validly signed delivery id is in the inbox exactly once; no bad-signature one is.
    const stored = new Map<string, number>();
    for (const row of deliveries) stored.set(row.id, (stored.get(row.id) ?? 0) + 1);
    expectNone(valid.filter((d) => stored.get(d.id) !== 1).map((d) => d.id));
    expectNone(bad.filter((d) => stored.has(d.id)).map((d) => d.id));
    expect(deliveries.length).toBe(valid.length);

    // Each was routed to its work item and finished.
    expectNone(
      deliveries
        .filter((row) => {
          const d = byId.get(row.id);
          return (
            !d ||
            row.status !== 'done' ||
            (row.route !== 'start' && row.route !== 'deliver') ||
            row.work_item !== `github:${REPO}#${d.item}`
          );
        })
        .map((row) => `${row.id}: ${row.status} ${row.route} ${row.work_item} ${row.error ?? ''}`),
    );

    // Every delivery ran exactly one succeeded turn; the only other turns are ones a kill interrupted.
    const turnsOf = new Map<string, typeof turns>();
    for (const t of turns) {
      const list = turnsOf.get(t.delivery_id ?? '') ?? [];
      list.push(t);
      turnsOf.set(t.delivery_id ?? '', list);
    }
    expectNone(
      turns.filter((t) => !t.delivery_id || !byId.get(t.delivery_id) || byId.get(t.delivery_id)?.bad),
    );
    const notOnce = valid.filter(
      (d) => (turnsOf.get(d.id) ?? []).filter((t) => t.status === 'succeeded').length !== 1,
    );
    expectNone(notOnce.map((d) => `${d.id}: ${JSON.stringify(turnsOf.get(d.id) ?? [])}`));
    expectNone(turns.filter((t) => t.status !== 'succeeded' && t.end_reason !== 'lost'));
    const succeededOf = new Map(
      turns.filter((t) => t.status === 'succeeded').map((t) => [t.delivery_id as string, t]),
    );
    expectNone(deliveries.filter((row) => row.turn_id !== succeededOf.get(row.id)?.id).map((row) => row.id));
    // A lost turn is exactly one that was running when its daemon died, and there are at most
    // `concurrency` of those per kill.
    expect(lost.length).toBe(inFlightAtKill.reduce((sum, n) => sum + n, 0));
    expect(lost.length).toBeLessThanOrEqual(KILLS * CONCURRENCY);

    // One session per work item; its succeeded turns' order is the deliveries' n order, which is
    // also their arrival order in the inbox.
    expect(sessions.length).toBe(ITEMS);
    const sessionOf = new Map(sessions.map((s) => [s.work_item, s.id]));
    const orderProblems: string[] = [];
    for (let item = 1; item <= ITEMS; item++) {
      const k = kPerItem.get(item) ?? 0;
      const expected = Array.from({ length: k }, (_, i) => i + 1);
      const workItem = `github:${REPO}#${item}`;
      const arrival = deliveries
        .filter((row) => row.work_item === workItem)
        .map((row) => byId.get(row.id)?.n ?? -1);
      if (JSON.stringify(arrival) !== JSON.stringify(expected))
        orderProblems.push(`#${item} arrival order: ${arrival.join(',')}`);
      const session = sessionOf.get(workItem);
      const ran = turns
        .filter((t) => t.status === 'succeeded' && t.session_id === session)
        .sort((a, b) => a.seq - b.seq)
        .map((t) => byId.get(t.delivery_id ?? '')?.n ?? -1);
      if (JSON.stringify(ran) !== JSON.stringify(expected))
        orderProblems.push(`#${item} turn order: ${ran.join(',')}`);
      if (turns.some((t) => t.session_id !== session && byId.get(t.delivery_id ?? '')?.item === item))
        orderProblems.push(`#${item} has turns outside its session`);
      // The engine saw this item's markers in n order; a re-run after a kill may repeat one.
      const seen = logLines
        .filter((l) => l.marker?.startsWith(`${item}:`))
        .map((l) => Number(l.marker?.split(/[: ]/)[1]));
      const collapsed = seen.filter((n, i) => i === 0 || n !== seen[i - 1]);
      if (JSON.stringify(collapsed) !== JSON.stringify(expected))
        orderProblems.push(`#${item} engine order: ${collapsed.join(',')}`);
    }
    expectNone(orderProblems);

    // The engine log agrees with the registry: every run carried a valid delivery's marker (nothing
    // with a bad signature reached an engine), and each succeeded turn is one of those runs.
    // pid → markers (a pid may be recycled within a long run).
    const runs = new Map<number, string[]>();
    for (const l of logLines) runs.set(l.pid, [...(runs.get(l.pid) ?? []), l.marker ?? '']);
    expectNone(logLines.filter((l) => !l.marker));
    expectNone(
      logLines.filter((l) => {
        const [, id] = (l.marker ?? '').split(' ');
        const d = byId.get(id ?? '');
        return !d || d.bad || l.marker !== `${d.item}:${d.n} ${d.id}`;
      }),
    );
    expectNone(
      [...succeededOf.values()].filter((t) => {
        const d = byId.get(t.delivery_id ?? '') as Delivery;
        return t.pid === null || !runs.get(t.pid)?.includes(`${d.item}:${d.n} ${d.id}`);
      }),
    );
    expect(logLines.length).toBeGreaterThanOrEqual(valid.length);
    expect(logLines.length).toBeLessThanOrEqual(valid.length + lost.length);

    // Nothing left behind: no daemon we started, no engine.
    expect(sup.started.filter((p) => p.exitedAt === undefined || pidAlive(p.pid)).map((p) => p.pid)).toEqual(
      [],
    );
    const strays = () => logLines.filter((l) => engineAlive(l.pid)).map((l) => l.pid);
    await waitFor(() => strays().length === 0, 5_000, 'engines to be gone').catch(() => {});
    expect(strays()).toEqual([]);
  }, 600_000); // ~300 s on 2 cores with the rest of the suite alongside: room, not a deadline.

  // Minimal reproduction of a window the fault test can hit by chance: a turn must be committed to
  // the registry (and its delivery marked running) before its engine is started. If the engine is
  // spawned inside a still-open transaction, a SIGKILL before the commit leaves an engine that ran
  // with no turn on record and a delivery that is queued again: done twice, with no `lost` trace.
  it('commits each turn before its engine starts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'the-loop-fault-commit-'));
    const repoDir = join(dir, 'widgets');
    mkdirSync(repoDir);
    const configPath = join(dir, 'config.yaml');
    writeFileSync(configPath, stringify(faultConfig(repoDir, 0, join(dir, 'engine.log'))));
    const app = await createApp({
      cwd: dir,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir },
      configPath,
    });
    const other = new Database(join(dir, 'data', 'the-loop.db'), { readonly: true });
    // What another process (a restarted daemon) would find at the moment each engine starts.
    const seenAtStart: { runningTurns: number; runningDeliveries: number }[] = [];
    const probe: Runner = {
      name: 'process',
      mode: 'headless',
      runTurn: async (input): Promise<RunOutcome> => {
        // A turn that reports like the engine it stands for (else the session would be held as
        // unaccounted after its first turn, and the others would wait).
        input.onEvent({ type: 'text', text: 'done' });
        input.onEvent({
          type: 'usage',
          usage: {
            inputTokens: 1,
            outputTokens: 1,
            cacheReadTokens: 0,
            cacheCreationTokens: 0,
            reasoningTokens: 0,
          },
        });
        seenAtStart.push({
          runningTurns: (
            other.prepare("SELECT COUNT(*) AS n FROM turns WHERE status = 'running'").get() as { n: number }
          ).n,
          runningDeliveries: (
            other.prepare("SELECT COUNT(*) AS n FROM deliveries WHERE status = 'running'").get() as {
              n: number;
            }
          ).n,
        });
        return {
          ok: true,
          endReason: 'result',
          endedAt: new Date(),
          exitCode: 0,
          exitSignal: null,
          error: null,
          stoppedBy: 'exit',
        };
      },
    };
    app.runners.process = probe;
    // Whoever dispatches runs the gateway (engines are given its address).
    await app.guard.gateway.start();
    const dispatcher = createDispatcher(app);
    try {
      for (let n = 1; n <= 3; n++) {
        const id = randomUUID();
        const body = payloadFor(7, n, id, 5_000_000_000 + n);
        // Routed on arrival, as ingress stores it.
        const routed = routeEvent('issue_comment', JSON.parse(body), app.loaded.config);
        await app.inbox.accept({
          id,
          source: 'github',
          event: 'issue_comment',
          action: 'created',
          body,
          routed,
        });
      }
      await dispatcher.start();
      const pending = () =>
        (
          other
            .prepare("SELECT COUNT(*) AS n FROM deliveries WHERE status IN ('queued', 'running')")
            .get() as {
            n: number;
          }
        ).n;
      await waitFor(() => pending() === 0, 30_000, 'three turns to run');
      expect(seenAtStart).toEqual([
        { runningTurns: 1, runningDeliveries: 1 },
        { runningTurns: 1, runningDeliveries: 1 },
        { runningTurns: 1, runningDeliveries: 1 },
      ]);
    } finally {
      await dispatcher.stop(0);
      await app.guard.gateway.stop();
      other.close();
      app.dispose();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
