/**
 * A push judged at the wire, pure: ref updates → acts → the policy's verdicts; the refusal report
 * git expects (report-status, report-status-v2, side-band framing); the upstream's report read back
 * (side-band demultiplexed, progress skipped) and each act settled from it.
 */
import { describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../../src/acts/policy.js';
import {
  encodePkt,
  encodeSideband,
  FLUSH_PKT,
  type RefCommand,
  readPkt,
} from '../../../src/gateway/git/pkt-line.js';
import {
  actOfCommand,
  clientCaps,
  errorReply,
  judgePush,
  type PushReport,
  PushReportReader,
  RESULT_TYPE,
  refusalReply,
  refusedActs,
  settlePush,
} from '../../../src/gateway/git/receive-pack.js';

const Z = '0'.repeat(40);
const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const cmd = (ref: string, oldOid = Z, newOid = A): RefCommand => ({ oldOid, newOid, ref });
const strict = resolvePolicy(undefined, undefined, 'main');
const permissive = resolvePolicy(
  undefined,
  { acts: { 'git-push': 'allow', 'git-delete-branch': 'allow' } },
  'main',
);

/** The report lines of a reply body (demultiplexed when side-band framed). */
function reportLines(body: Buffer, sideband: boolean): { lines: string[]; complete: boolean } {
  const reader = new PushReportReader(sideband, 100);
  reader.push(body);
  const r = reader.report;
  const lines = [
    `unpack ${r.unpack}`,
    ...[...r.refs].map(([ref, s]) => (s === 'ok' ? `ok ${ref}` : `ng ${ref} ${s.slice(3)}`)),
  ];
  return { lines, complete: r.complete };
}

describe('acts of ref updates', () => {
  it('names each update by what it does to which ref, with its oids and how it was seen', () => {
    const seen = { via: 'git-receive-pack' };
    expect(actOfCommand(cmd('refs/heads/feat/x'))).toEqual({
      kind: 'git-push',
      command: 'git-receive-pack refs/heads/feat/x',
      detail: { ...seen, ref: 'refs/heads/feat/x', oldOid: Z, newOid: A, branches: ['feat/x'] },
    });
    expect(actOfCommand(cmd('refs/heads/main', A, B)).detail.branches).toEqual(['main']);
    expect(actOfCommand(cmd('refs/heads/old', A, Z))).toMatchObject({
      kind: 'git-delete-branch',
      detail: { branches: ['old'], oldOid: A, newOid: Z },
    });
    expect(actOfCommand(cmd('refs/tags/v1'))).toMatchObject({
      kind: 'git-push-tags',
      detail: { tags: ['v1'] },
    });
    expect(actOfCommand(cmd('refs/tags/v1')).detail.action).toBeUndefined();
    expect(actOfCommand(cmd('refs/tags/v1', A, Z))).toMatchObject({
      kind: 'git-push-tags',
      detail: { tags: ['v1'], action: 'delete' },
    });
    expect(actOfCommand(cmd('refs/notes/commits'))).toMatchObject({
      kind: 'git-push',
      detail: { refs: ['refs/notes/commits'] },
    });
    expect(actOfCommand(cmd('refs/for/main', A, Z)).detail).toMatchObject({
      refs: ['refs/for/main'],
      action: 'delete',
    });
  });

  it('are judged by the policy: the default protects main and denies tags; a permissive one allows main', () => {
    const verdicts = (policy: typeof strict, ...cmds: RefCommand[]) =>
      judgePush(cmds, policy).judged.map((j) => `${j.command.ref} ${j.verdict.verdict} (${j.verdict.rule})`);
    expect(
      verdicts(
        strict,
        cmd('refs/heads/main'),
        cmd('refs/heads/main', A, Z),
        cmd('refs/heads/feature'),
        cmd('refs/heads/feature', A, Z),
        cmd('refs/tags/v1'),
        cmd('refs/notes/commits'),
      ),
    ).toEqual([
      'refs/heads/main deny (git-push: deny-protected)',
      'refs/heads/main deny (git-delete-branch: deny-protected)',
      'refs/heads/feature allow (git-push: deny-protected)',
      'refs/heads/feature allow (git-delete-branch: deny-protected)',
      'refs/tags/v1 deny (git-push-tags: deny)',
      'refs/notes/commits allow (git-push: deny-protected)',
    ]);
    expect(judgePush([cmd('refs/heads/feature')], strict).refused).toBe(false);
    expect(judgePush([cmd('refs/heads/feature'), cmd('refs/heads/main')], strict).refused).toBe(true);
    expect(judgePush([cmd('refs/heads/main'), cmd('refs/heads/main', A, Z)], permissive).refused).toBe(false);
  });
});

describe('a refused push', () => {
  const judgement = judgePush([cmd('refs/heads/feature'), cmd('refs/heads/main', A, B)], strict);

  it('is recorded whole: the denied update blocked, the others not applied', () => {
    const acts = refusedActs(judgement);
    expect(acts.map((a) => [a.detail.ref, a.outcome, a.verdict])).toEqual([
      ['refs/heads/feature', 'failed', 'allow'],
      ['refs/heads/main', 'blocked', 'deny'],
    ]);
    expect(acts[1]?.reason).toBe('pushing to the protected branch main is not allowed in this repository');
    expect(acts[0]?.reason).toMatch(/another ref of the same push was refused/);
    expect(acts.every((a) => a.detail.upstream === 'not sent (refused by the gateway)')).toBe(true);
  });

  it('answers report-status with unpack ok and ng for every ref, the policy reason on the denied one', () => {
    const reply = refusalReply(judgement, clientCaps(['report-status', 'agent=git/2.39.5']));
    expect(reply.status).toBe(200);
    expect(reply.contentType).toBe(RESULT_TYPE);
    expect(reply.body.toString()).toBe(
      [
        '000eunpack ok\n',
        '0062ng refs/heads/feature [the-loop policy] not applied: another ref of the same push was refused\n',
        '0070ng refs/heads/main [the-loop policy] pushing to the protected branch main is not allowed in this repository\n',
        '0000',
      ].join(''),
    );
  });

  it('frames the same report on band 1 for side-band-64k and side-band, then a flush', () => {
    const plain = refusalReply(judgement, clientCaps(['report-status'])).body;
    for (const [cap, max] of [
      ['side-band-64k', 65520],
      ['side-band', 1000],
    ] as const) {
      const reply = refusalReply(judgement, clientCaps(['report-status-v2', cap]));
      expect(reply.body.subarray(-4).equals(FLUSH_PKT)).toBe(true);
      const read = readPkt(reply.body, 0);
      if (!('pkt' in read) || read.pkt.kind !== 'data') throw new Error('not a packet');
      expect(read.pkt.payload[0]).toBe(1);
      expect(read.next).toBeLessThanOrEqual(max);
      expect(reportLines(reply.body, true)).toEqual(reportLines(plain, false));
      expect(reportLines(reply.body, true).complete).toBe(true);
    }
  });

  it('keeps a reason on one line, and refuses in plain text a client that asked for no report', () => {
    const odd = judgePush([cmd('refs/heads/main')], {
      protectedBranches: ['main'],
      rules: { ...strict.rules, 'git-push': 'deny' },
    });
    expect(refusalReply(odd, clientCaps(['report-status'])).body.toString()).not.toMatch(/\n(?!0)/);
    const none = refusalReply(judgement, clientCaps([]));
    expect(none.status).toBe(403);
    expect(none.contentType).toMatch(/^text\/plain/);
    expect(none.body.toString()).toMatch(/^\[the-loop policy\] pushing to the protected branch main/);
  });

  it('reports a fatal error on band 3, as an ERR line, or as plain text, as the client can take it', () => {
    const band3 = errorReply('too many refs', clientCaps(['report-status', 'side-band-64k']), 413);
    expect(band3.body.toString('latin1')).toBe(`0013\x03too many refs\n0000`);
    expect(errorReply('too many refs', clientCaps(['report-status']), 413).body.toString()).toBe(
      '0016ERR too many refs\n',
    );
    expect(errorReply('too many refs', clientCaps([]), 413)).toMatchObject({ status: 413 });
  });
});

describe("the upstream's report", () => {
  const report = Buffer.concat([
    encodePkt('unpack ok\n'),
    encodePkt('ok refs/heads/feature\n'),
    encodePkt('option refname refs/heads/feature\n'),
    encodePkt('ng refs/heads/other non-fast-forward\n'),
    FLUSH_PKT,
  ]);
  const framed = Buffer.concat([
    encodeSideband(2, Buffer.from('Resolving deltas: 100% (3/3)\n')),
    encodePkt(Buffer.from([1])), // a keepalive
    encodeSideband(1, report.subarray(0, 20)),
    encodeSideband(2, Buffer.from('more progress\r')),
    encodeSideband(1, report.subarray(20)),
    FLUSH_PKT,
  ]);

  const read = (body: Buffer, sideband: boolean, size: number): PushReport => {
    const reader = new PushReportReader(sideband, 10);
    for (let at = 0; at < body.length; at += size) reader.push(body.subarray(at, at + size));
    return reader.report;
  };

  it('is read plain or side-band framed, progress and keepalives skipped, whatever the chunking', () => {
    const want = {
      unpack: 'ok',
      refs: new Map([
        ['refs/heads/feature', 'ok'],
        ['refs/heads/other', 'ng non-fast-forward'],
      ]),
      complete: true,
      remoteError: undefined,
    };
    for (const size of [1, 5, 1000]) {
      expect(read(report, false, size)).toEqual(want);
      expect(read(framed, true, size)).toEqual(want);
    }
  });

  it('is incomplete when cut, and carries a fatal error the upstream sent instead', () => {
    expect(read(framed.subarray(0, framed.length - 20), true, 7).complete).toBe(false);
    expect(read(report.subarray(0, 30), false, 7)).toMatchObject({ unpack: 'ok', complete: false });
    const fatal = Buffer.concat([encodeSideband(3, Buffer.from('fatal: out of space\n')), FLUSH_PKT]);
    expect(read(fatal, true, 3)).toMatchObject({ complete: false, remoteError: 'fatal: out of space' });
    expect(read(encodePkt('ERR access denied\n'), false, 4)).toMatchObject({ remoteError: 'access denied' });
    expect(read(Buffer.from('garbage that is not a pkt-line'), false, 4)).toMatchObject({
      unpack: undefined,
      complete: false,
    });
    expect(read(Buffer.concat([encodePkt('hello\n'), FLUSH_PKT]), false, 4).complete).toBe(false);
  });

  it('keeps at most its bound of ref statuses', () => {
    const lines = Array.from({ length: 50 }, (_, i) => encodePkt(`ok refs/heads/b${i}\n`));
    const r = read(Buffer.concat([encodePkt('unpack ok\n'), ...lines, FLUSH_PKT]), false, 64);
    expect(r.refs.size).toBe(10);
    expect(r.complete).toBe(true);
  });

  it('settles each act: ok succeeded, ng failed with the reason, no status unknown or as the caller knows', () => {
    const judged = judgePush(
      [cmd('refs/heads/feature'), cmd('refs/heads/other'), cmd('refs/heads/third')],
      strict,
    ).judged;
    const complete = read(report, false, 100);
    const settled = settlePush(judged, complete, { outcome: 'unknown', upstream: 'cut' });
    expect(settled.map((a) => [a.detail.ref, a.outcome, a.detail.upstream])).toEqual([
      ['refs/heads/feature', 'succeeded', 'ok'],
      ['refs/heads/other', 'failed', 'ng non-fast-forward'],
      ['refs/heads/third', 'unknown', 'the upstream reported no status for this ref'],
    ]);
    expect(settled.every((a) => a.verdict === 'allow' && a.rule === 'git-push: deny-protected')).toBe(true);
    const cut = read(report.subarray(0, 30), false, 100);
    expect(settlePush(judged, cut, { outcome: 'failed', upstream: 'refused' }).map((a) => a.outcome)).toEqual(
      ['failed', 'failed', 'failed'],
    );
    const unpackError = read(
      Buffer.concat([encodePkt('unpack index-pack abnormal exit\n'), FLUSH_PKT]),
      false,
      9,
    );
    expect(
      settlePush(judged, unpackError, { outcome: 'unknown', upstream: 'x' }).map((a) => a.detail.upstream),
    ).toEqual([
      'unpack index-pack abnormal exit',
      'unpack index-pack abnormal exit',
      'unpack index-pack abnormal exit',
    ]);
  });
});
