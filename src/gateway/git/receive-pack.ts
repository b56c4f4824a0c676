import { decide, type Policy, type Verdict } from '../../acts/decide.js';
import type { ClassifiedAct } from '../../acts/types.js';
import type { WireAct, WireOutcome } from '../types.js';
import {
  encodePkt,
  encodeSideband,
  FLUSH_PKT,
  isZeroOid,
  type Pkt,
  type RefCommand,
  readPkt,
  SIDEBAND_PKT_MAX,
} from './pkt-line.js';

/**
 * A push judged at the wire: each ref update of a receive-pack request becomes an act, the policy
 * decides on it, and a push with any denied update is refused as a whole with the report git
 * expects (Documentation/gitprotocol-pack.txt "Report Status"), so `git push` prints
 * `! [remote rejected] main -> main ([the-loop policy] …)` and exits non-zero. Pure.
 *
 * A forced update cannot be told from a plain one here: the command carries only the old and the
 * new object id, and whether new descends from old needs the objects (the pack, the upstream's
 * history). So a forced branch update is judged as `git-push`, with its oids recorded; the
 * upstream's own rules (non-fast-forward, branch protection) still apply to it.
 */

export const POLICY_PREFIX = '[the-loop policy]';
export const RESULT_TYPE = 'application/x-git-receive-pack-result';

export interface JudgedCommand {
  command: RefCommand;
  act: ClassifiedAct;
  verdict: Verdict;
}

export interface PushJudgement {
  judged: JudgedCommand[];
  /** Some update is denied: nothing of this push may be forwarded (atomic, as `git push --atomic`). */
  refused: boolean;
}

/** The act one ref update is: branch push or deletion, tag push or deletion, another ref. */
export function actOfCommand(cmd: RefCommand): ClassifiedAct {
  const { ref, oldOid, newOid } = cmd;
  const command = `git-receive-pack ${ref}`;
  const base = { via: 'git-receive-pack', ref, oldOid, newOid };
  const deleting = isZeroOid(newOid);
  if (ref.startsWith('refs/heads/')) {
    const branch = ref.slice('refs/heads/'.length);
    return deleting
      ? { kind: 'git-delete-branch', command, detail: { ...base, branches: [branch] } }
      : { kind: 'git-push', command, detail: { ...base, branches: [branch] } };
  }
  if (ref.startsWith('refs/tags/')) {
    const tag = ref.slice('refs/tags/'.length);
    return {
      kind: 'git-push-tags',
      command,
      detail: { ...base, tags: [tag], ...(deleting && { action: 'delete' }) },
    };
  }
  return {
    kind: 'git-push',
    command,
    detail: { ...base, refs: [ref], ...(deleting && { action: 'delete' }) },
  };
}

export function judgePush(commands: readonly RefCommand[], policy: Policy): PushJudgement {
  const judged = commands.map((command) => {
    const act = actOfCommand(command);
    return { command, act, verdict: decide(act, policy) };
  });
  return { judged, refused: judged.some((j) => j.verdict.verdict === 'deny') };
}

const NOT_APPLIED = 'not applied: another ref of the same push was refused';

/** The acts of a refused push: the denied ones blocked, the others not applied (failed) with the reason. */
export function refusedActs(judgement: PushJudgement): WireAct[] {
  return judgement.judged.map(({ act, verdict }) => {
    const denied = verdict.verdict === 'deny';
    return {
      kind: act.kind,
      command: act.command,
      detail: { ...act.detail, upstream: 'not sent (refused by the gateway)' },
      outcome: denied ? 'blocked' : 'failed',
      verdict: verdict.verdict,
      rule: verdict.rule,
      reason: denied ? verdict.reason : NOT_APPLIED,
    };
  });
}

// ── what the client asked for, and what we answer it

export interface ClientCaps {
  /** The report the client asked for; undefined: none (it then learns nothing per ref). */
  report: 'report-status' | 'report-status-v2' | undefined;
  /** The side-band packet maximum when the client asked for side-band; undefined: plain pkt-lines. */
  sideband: number | undefined;
}

export function clientCaps(capabilities: readonly string[]): ClientCaps {
  const has = (c: string) => capabilities.includes(c);
  return {
    report: has('report-status-v2') ? 'report-status-v2' : has('report-status') ? 'report-status' : undefined,
    sideband: has('side-band-64k')
      ? SIDEBAND_PKT_MAX['side-band-64k']
      : has('side-band')
        ? SIDEBAND_PKT_MAX['side-band']
        : undefined,
  };
}

/** A whole answer to a receive-pack POST, built by us. */
export interface GitReply {
  status: number;
  contentType: string;
  body: Buffer;
}

/** One line of text fit for a report: no control characters (a LF would end the line), bounded. */
const oneLine = (text: string): string => text.replace(/[\x00-\x1f\x7f]+/g, ' ').slice(0, 1000);

/**
 * The report of a refused push: `unpack ok` (nothing was unpacked, nothing failed to), then `ng`
 * for every ref, then a flush — framed on band 1 when the client asked for side-band, with the
 * closing flush receive-pack writes after its side-band output (builtin/receive-pack.c).
 */
export function refusalReply(judgement: PushJudgement, caps: ClientCaps): GitReply {
  const denied = judgement.judged.find((j) => j.verdict.verdict === 'deny');
  const first = `${POLICY_PREFIX} ${oneLine(denied?.verdict.reason ?? 'refused')}`;
  if (!caps.report) return errorReply(first, caps, 403);
  const lines = judgement.judged.map(({ command, verdict }) =>
    verdict.verdict === 'deny'
      ? `ng ${command.ref} ${POLICY_PREFIX} ${oneLine(verdict.reason ?? 'refused')}`
      : `ng ${command.ref} ${POLICY_PREFIX} ${NOT_APPLIED}`,
  );
  const report = Buffer.concat([...['unpack ok', ...lines].map((l) => encodePkt(`${l}\n`)), FLUSH_PKT]);
  const body = caps.sideband ? Buffer.concat([encodeSideband(1, report, caps.sideband), FLUSH_PKT]) : report;
  return { status: 200, contentType: RESULT_TYPE, body };
}

/**
 * A push refused before its refs could be judged (too many refs, a signed push): a fatal error the
 * client prints as `remote error: …` — band 3 with side-band, else an `ERR` pkt-line (both make
 * send-pack die with the message: sideband.c, pkt-line.c PACKET_READ_DIE_ON_ERR_PACKET). A client
 * that asked for no report gets a plain-text HTTP error instead.
 */
export function errorReply(message: string, caps: ClientCaps, plainStatus: number): GitReply {
  const text = oneLine(message);
  if (caps.sideband) {
    const body = Buffer.concat([encodeSideband(3, Buffer.from(`${text}\n`), caps.sideband), FLUSH_PKT]);
    return { status: 200, contentType: RESULT_TYPE, body };
  }
  if (caps.report) return { status: 200, contentType: RESULT_TYPE, body: encodePkt(`ERR ${text}\n`) };
  return { status: plainStatus, contentType: 'text/plain; charset=utf-8', body: Buffer.from(`${text}\n`) };
}

// ── settling a forwarded push from the upstream's report

export interface PushReport {
  /** `ok`, or the unpack error; undefined: the report never began. */
  unpack: string | undefined;
  /** Per ref: `ok`, or `ng <reason>`. */
  refs: Map<string, string>;
  /** The report's closing flush arrived. */
  complete: boolean;
  /** A fatal error the upstream sent instead (band 3 or `ERR`). */
  remoteError: string | undefined;
}

/**
 * The acts of a forwarded push, settled: `ok <ref>` succeeded, `ng <ref> <why>` failed, an unpack
 * error failed them all; a ref with no status in the report (or no report at all) takes `otherwise`
 * (`unknown` unless the caller is certain nothing was applied).
 */
export function settlePush(
  judged: readonly JudgedCommand[],
  report: PushReport,
  otherwise: { outcome: WireOutcome; upstream: string },
): WireAct[] {
  const unpackFailed = report.unpack !== undefined && report.unpack !== 'ok';
  return judged.map(({ command, act, verdict }) => {
    const status = report.refs.get(command.ref);
    let outcome: WireOutcome;
    let upstream: string;
    if (unpackFailed) {
      outcome = 'failed';
      upstream = `unpack ${report.unpack}`;
    } else if (status === 'ok') {
      outcome = 'succeeded';
      upstream = 'ok';
    } else if (status !== undefined) {
      outcome = 'failed';
      upstream = status;
    } else if (report.complete) {
      outcome = 'unknown';
      upstream = 'the upstream reported no status for this ref';
    } else {
      outcome = otherwise.outcome;
      upstream = report.remoteError ? `${otherwise.upstream}: ${report.remoteError}` : otherwise.upstream;
    }
    return {
      kind: act.kind,
      command: act.command,
      detail: { ...act.detail, upstream },
      outcome,
      verdict: verdict.verdict,
      rule: verdict.rule,
    };
  });
}

const lossy = new TextDecoder('utf-8');

/**
 * Reads the upstream's answer to a receive-pack POST as it streams to the client (the bytes
 * themselves go to the client untouched, progress included): demultiplexes side-band (band 1 holds
 * the report as pkt-lines of its own, band 2 progress, band 3 a fatal error) and collects the
 * report. Bounded: at most one partial packet per layer is kept, and at most `maxRefs` statuses.
 * Anything it cannot read ends its reading; the report then stays incomplete (outcomes unknown).
 */
export class PushReportReader {
  readonly report: PushReport = {
    unpack: undefined,
    refs: new Map(),
    complete: false,
    remoteError: undefined,
  };
  private outer: Buffer = Buffer.alloc(0);
  private inner: Buffer = Buffer.alloc(0);
  private stopped = false;

  constructor(
    private readonly sideband: boolean,
    private readonly maxRefs: number,
  ) {}

  push(chunk: Buffer): void {
    if (this.stopped) return;
    if (!this.sideband) {
      this.inner = this.feed(this.inner, chunk, (pkt) => this.reportPkt(pkt));
      return;
    }
    this.outer = this.feed(this.outer, chunk, (pkt) => {
      // The flush after the side-band output ends the answer; a report not complete by then never will be.
      if (pkt.kind !== 'data') {
        this.stop();
        return;
      }
      const band = pkt.payload[0];
      const data = pkt.payload.subarray(1);
      if (band === 1) this.inner = this.feed(this.inner, data, (p) => this.reportPkt(p));
      else if (band === 3) this.fatal(lossy.decode(data));
      else if (band !== 2) this.stop();
    });
  }

  /** Parse the pkt-lines of `pending + chunk`; what is left (one partial packet at most) is returned. */
  private feed(pending: Buffer, chunk: Buffer, onPkt: (pkt: Pkt) => void): Buffer {
    const buf = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
    let at = 0;
    while (!this.stopped) {
      const read = readPkt(buf, at);
      if ('need' in read) break;
      if ('error' in read) {
        this.stop();
        break;
      }
      at = read.next;
      onPkt(read.pkt);
    }
    // Copied: a view would pin the whole chunk it came from.
    return this.stopped ? Buffer.alloc(0) : Buffer.from(buf.subarray(at));
  }

  private reportPkt(pkt: Pkt): void {
    const r = this.report;
    if (pkt.kind !== 'data') {
      // The report's closing flush (after `unpack` and the statuses).
      r.complete = pkt.kind === 'flush' && r.unpack !== undefined;
      this.stop();
      return;
    }
    if (pkt.payload.length === 0) return; // a keepalive
    const text = lossy.decode(pkt.payload).replace(/\n$/, '');
    if (text.startsWith('ERR ')) {
      this.fatal(text.slice(4));
      return;
    }
    if (r.unpack === undefined) {
      if (text.startsWith('unpack ')) r.unpack = text.slice('unpack '.length);
      else this.stop();
      return;
    }
    const m = /^(ok|ng) (\S+)(?: (.*))?$/s.exec(text);
    if (!m) return; // `option …` lines of report-status-v2
    const [, status = '', ref = '', why = ''] = m;
    if (r.refs.size >= this.maxRefs && !r.refs.has(ref)) return;
    r.refs.set(ref, status === 'ok' ? 'ok' : `ng ${why}`);
  }

  private fatal(message: string): void {
    this.report.remoteError = oneLine(message).trim();
    this.stop();
  }

  private stop(): void {
    this.stopped = true;
    this.outer = Buffer.alloc(0);
    this.inner = Buffer.alloc(0);
  }
}
