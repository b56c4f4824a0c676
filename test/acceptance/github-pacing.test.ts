/**
 * Answering on GitHub under load (issue 18): a burst of 50 triggers on 50 issues, through a real
 * daemon (the fake engine) answering as a GitHub App against the fake GitHub API. Every trigger gets
 * its reaction and one tracking comment that ends finished; the writes keep the configured pacing
 * (a lower bound on the gap between two writes, and between two comments); a secondary rate limit
 * with `retry-after` delays the edit it hit and loses none.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AppDaemon, startAppDaemon } from '../helpers/github-app-daemon.js';

const WRITE_GAP = 60;
const COMMENT_GAP = 120;
const BURST = 50;

describe('a burst of 50 triggers, paced, with a secondary rate limit on the way', () => {
  let app: AppDaemon;

  beforeAll(async () => {
    app = await startAppDaemon({
      prefix: 'the-loop-gh-pacing-',
      status: { editIntervalSeconds: 0.2 },
      pacing: { writeGapMs: WRITE_GAP, commentGapMs: COMMENT_GAP },
      dispatch: { concurrency: 4 },
    });
  }, 60_000);

  afterAll(async () => app?.close());

  it('reacts to each, ends each comment finished, keeps the gaps, and waits out retry-after', async () => {
    const { github } = app;
    // The first edit of a tracking comment meets a secondary rate limit (retry after 1 s).
    github.secondaryLimit({ method: 'PATCH', path: /\/issues\/comments\/\d+$/ }, 1);
    const sent = await Promise.all(
      Array.from({ length: BURST }, async (_, k) => ({ n: 100 + k, ...(await app.trigger(100 + k)) })),
    );
    for (const s of sent) expect(await app.settled(s.id)).toBe('done');
    const finals = await app.until(
      'every tracking comment to say finished',
      async () => {
        const out = sent.map((s) =>
          github.comments('acme', 'widgets', s.n).filter((c) => c.body.includes(`delivery=${s.id}`)),
        );
        return out.every((cs) => cs.length === 1 && /Finished/.test(cs[0]?.body ?? '')) ? out : undefined;
      },
      1200,
    );
    // One comment each, created once.
    expect(finals.flat()).toHaveLength(BURST);
    // Each trigger has its eyes.
    for (const s of sent)
      expect(
        github.reactions.some((r) => r.target.kind === 'issue-comment' && r.target.id === s.comment),
      ).toBe(true);

    // The rate-limited edit was sent again after its retry-after, and nothing was lost.
    const limited = github.calls.find((c) => c.status === 403 && c.method === 'PATCH');
    expect(limited).toBeDefined();
    const again = github.calls.find(
      (c) =>
        c.method === 'PATCH' && c.path === limited?.path && c.at > (limited?.at ?? 0) && c.status === 200,
    );
    expect(again).toBeDefined();
    expect((again?.at ?? 0) - (limited?.at ?? 0)).toBeGreaterThanOrEqual(900);

    // Pacing: writes one at a time, at least WRITE_GAP apart (arrival times; a little slack for the
    // trip), comments at least COMMENT_GAP apart.
    const writes = github.calls.filter((c) => c.method !== 'GET' && c.path.startsWith('/repos/'));
    const gaps = writes.slice(1).map((c, i) => c.at - (writes[i]?.at ?? 0));
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(WRITE_GAP * 0.75);
    const creates = writes.filter((c) => c.method === 'POST' && /\/issues\/\d+\/comments$/.test(c.path));
    expect(creates).toHaveLength(BURST);
    const createGaps = creates.slice(1).map((c, i) => c.at - (creates[i]?.at ?? 0));
    expect(Math.min(...createGaps)).toBeGreaterThanOrEqual(COMMENT_GAP * 0.75);
  }, 300_000);
});
