/**
 * The pkt-line codec of git's smart protocols (Documentation/gitprotocol-common.txt "pkt-line
 * Format", gitprotocol-pack.txt "Reference Update Request"), and an incremental reader of the head
 * of a `git-receive-pack` request: the `shallow` lines and the command list up to its flush-pkt.
 * Pure: bytes in, values out; no I/O. What follows the head (push options, the pack) is never read
 * here: the proxy streams it.
 */

/** LARGE_PACKET_MAX (pkt-line.h): the largest pkt-line, its 4-byte length included. */
export const PKT_MAX = 65520;
/** The largest side-band packet of each side-band flavour (gitprotocol-pack.txt "side-band, side-band-64k"). */
export const SIDEBAND_PKT_MAX = { 'side-band': 1000, 'side-band-64k': PKT_MAX } as const;

export const FLUSH_PKT: Buffer = Buffer.from('0000', 'latin1');

/** What one receive-pack request head may hold before it is refused (3,000 branches fit many times over). */
export interface HeadLimits {
  /** Ref update commands in one push. */
  commands: number;
  /** Bytes of the whole head (shallow lines + command list + flush). */
  bytes: number;
}
export const HEAD_LIMITS: HeadLimits = { commands: 10_000, bytes: 4 * 1024 * 1024 };

/** One pkt-line: a payload, or one of the special packets of protocol v2 (never valid in a push head). */
export type Pkt = { kind: 'data'; payload: Buffer } | { kind: 'flush' } | { kind: 'delim' } | { kind: 'end' };

export type PktRead = { pkt: Pkt; next: number } | { need: true } | { error: string };

/** Read the pkt-line at `offset`: the packet and where the next one starts, more bytes needed, or why not. */
export function readPkt(buf: Buffer, offset: number): PktRead {
  if (buf.length - offset < 4) return { need: true };
  const head = buf.toString('latin1', offset, offset + 4);
  if (!/^[0-9a-fA-F]{4}$/.test(head)) return { error: `bad pkt-line length ${JSON.stringify(head)}` };
  const len = Number.parseInt(head, 16);
  if (len === 0) return { pkt: { kind: 'flush' }, next: offset + 4 };
  if (len === 1) return { pkt: { kind: 'delim' }, next: offset + 4 };
  if (len === 2) return { pkt: { kind: 'end' }, next: offset + 4 };
  if (len < 4) return { error: `bad pkt-line length ${len} (below the 4-byte minimum)` };
  if (len > PKT_MAX) return { error: `pkt-line of ${len} bytes (over the ${PKT_MAX}-byte maximum)` };
  if (buf.length - offset < len) return { need: true };
  return { pkt: { kind: 'data', payload: buf.subarray(offset + 4, offset + len) }, next: offset + len };
}

/** One data pkt-line; a payload too long for one is a bug of the caller. */
export function encodePkt(payload: string | Uint8Array): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload, 'utf8') : Buffer.from(payload);
  if (body.length + 4 > PKT_MAX) throw new RangeError(`pkt-line payload of ${body.length} bytes is too long`);
  return Buffer.concat([Buffer.from((body.length + 4).toString(16).padStart(4, '0'), 'latin1'), body]);
}

/**
 * `data` framed on a side-band channel: band 1 carries the report (itself pkt-lines), band 2
 * progress (shown as `remote: …`), band 3 a fatal error (the client dies with `remote error: …`).
 * Split into as many packets as the flavour's maximum needs.
 */
export function encodeSideband(band: 1 | 2 | 3, data: Uint8Array, maxPkt: number = PKT_MAX): Buffer {
  const room = maxPkt - 5;
  const parts: Buffer[] = [];
  for (let at = 0; at < data.length; at += room) {
    parts.push(encodePkt(Buffer.concat([Buffer.of(band), data.subarray(at, at + room)])));
  }
  return Buffer.concat(parts);
}

// ── the head of a receive-pack request

/** One ref update: `<old> <new> <ref>` (gitprotocol-pack.txt: create / delete / update). */
export interface RefCommand {
  oldOid: string;
  newOid: string;
  ref: string;
}

export interface PushHead {
  commands: RefCommand[];
  /** The capabilities the client asked for, from after the NUL of its first command. */
  capabilities: string[];
  shallow: string[];
  /** Bytes of the head, flush included: where push options or the pack begin. */
  length: number;
}

export type HeadRefusal = 'malformed' | 'limit' | 'unsupported';
export type HeadStep =
  | { state: 'more' }
  | { state: 'done'; head: PushHead }
  | { state: 'refused'; why: HeadRefusal; message: string; capabilities: string[] };

const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Whether an oid is all zeros (the ref is created from, or deleted to, nothing). */
export const isZeroOid = (oid: string): boolean => /^0+$/.test(oid);

/**
 * Why `ref` is not a ref a push may name, or undefined: git's check-ref-format rules
 * (refs.c check_refname_component) and a `refs/` prefix (receive-pack refuses "funny" refs).
 */
export function refNameProblem(ref: string): string | undefined {
  if (ref.length > 1024) return 'longer than 1024 characters';
  if (!ref.startsWith('refs/')) return 'not under refs/';
  if (/[\x00-\x20\x7f~^:?*[\\]/.test(ref)) return 'has a space, a control character or one of ~^:?*[\\';
  if (ref.includes('..') || ref.includes('@{') || ref.includes('//')) return 'has "..", "@{" or "//"';
  if (ref.endsWith('/') || ref.endsWith('.')) return 'ends with "/" or "."';
  for (const part of ref.split('/')) {
    if (part.startsWith('.') || part.endsWith('.lock'))
      return 'has a component starting with "." or ending with ".lock"';
  }
  if (ref === 'refs/heads' || ref === 'refs/tags') return 'names no branch or tag';
  return undefined;
}

/** Parse one command line (its trailing LF tolerated, as receive-pack chomps it). */
export function parseCommand(text: string): RefCommand | string {
  const line = text.endsWith('\n') ? text.slice(0, -1) : text;
  const m = /^([^ ]+) ([^ ]+) (.+)$/s.exec(line);
  if (!m) return 'expected "<old-oid> <new-oid> <ref>"';
  const [, oldOid = '', newOid = '', ref = ''] = m;
  if (!OID.test(oldOid) || !OID.test(newOid) || oldOid.length !== newOid.length) {
    return 'object ids must be 40 (sha1) or 64 (sha256) lower-case hex digits, both of one length';
  }
  const problem = refNameProblem(ref);
  return problem ? `bad ref name ${JSON.stringify(ref.slice(0, 200))}: ${problem}` : { oldOid, newOid, ref };
}

/**
 * Reads the head of a receive-pack request as its bytes arrive, keeping at most one partial
 * pkt-line besides what it has parsed. Every refusal is final: once refused or done, it stays so.
 */
export class ReceivePackHeadReader {
  private pending: Buffer = Buffer.alloc(0);
  private consumed = 0;
  private readonly commands: RefCommand[] = [];
  private readonly shallow: string[] = [];
  private readonly refs = new Set<string>();
  private capabilities: string[] = [];
  private final: HeadStep | undefined;

  constructor(private readonly limits: HeadLimits = HEAD_LIMITS) {}

  /** Feed the next chunk of the request body. */
  push(chunk: Buffer): HeadStep {
    if (this.final) return this.final;
    this.pending = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    let at = 0;
    for (;;) {
      const read = readPkt(this.pending, at);
      if ('error' in read) return this.refuse('malformed', `malformed pkt-line: ${read.error}`);
      if ('need' in read) break;
      if (this.consumed + read.next > this.limits.bytes) return this.overBytes();
      const step = this.take(read.pkt, this.consumed + read.next);
      at = read.next;
      if (step) return step;
    }
    this.consumed += at;
    this.pending = this.pending.subarray(at);
    if (this.consumed + this.pending.length > this.limits.bytes) return this.overBytes();
    return { state: 'more' };
  }

  /** The body ended: a head that is not complete is truncated. */
  end(): HeadStep {
    if (this.final) return this.final;
    return this.refuse(
      'malformed',
      'truncated request: the body ended before the command list and its flush-pkt',
    );
  }

  private take(pkt: Pkt, length: number): HeadStep | undefined {
    if (pkt.kind === 'flush') {
      return this.settle({
        state: 'done',
        head: { commands: this.commands, capabilities: this.capabilities, shallow: this.shallow, length },
      });
    }
    if (pkt.kind !== 'data') return this.refuse('malformed', `unexpected ${pkt.kind} packet in a push`);
    if (pkt.payload.length === 0) return this.refuse('malformed', 'empty pkt-line in the command list');
    let text: string;
    try {
      text = utf8.decode(pkt.payload);
    } catch {
      return this.refuse('malformed', 'a command line is not valid UTF-8');
    }
    return this.takeLine(text);
  }

  private takeLine(text: string): HeadStep | undefined {
    if (text.startsWith('shallow ') && this.commands.length === 0) {
      const oid = text.slice(8).replace(/\n$/, '');
      if (!OID.test(oid)) return this.refuse('malformed', 'bad object id on a shallow line');
      if (this.shallow.length >= this.limits.commands) return this.overCommands();
      this.shallow.push(oid);
      return undefined;
    }
    const nul = text.indexOf('\0');
    if (nul >= 0) {
      if (this.commands.length > 0) return this.refuse('malformed', 'capabilities after the first command');
      this.capabilities = text
        .slice(nul + 1)
        .replace(/\n$/, '')
        .split(' ')
        .filter((c) => c !== '');
      if (this.capabilities.some((c) => /[\x00-\x1f\x7f]/.test(c))) {
        return this.refuse('malformed', 'a control character in the capability list');
      }
    } else if (this.commands.length === 0 && !text.startsWith('push-cert')) {
      return this.refuse('malformed', 'the first command carries no capability list');
    }
    const line = nul >= 0 ? text.slice(0, nul) : text;
    if (line.startsWith('push-cert')) {
      return this.refuse(
        'unsupported',
        'signed pushes (push-cert) are not supported through the-loop gateway: push without --signed',
      );
    }
    return this.addCommand(line);
  }

  private addCommand(line: string): HeadStep | undefined {
    const command = parseCommand(line);
    if (typeof command === 'string') return this.refuse('malformed', `bad ref update command: ${command}`);
    const first = this.commands[0];
    if (first && first.oldOid.length !== command.oldOid.length) {
      return this.refuse('malformed', 'object ids of two lengths (sha1 and sha256) in one push');
    }
    if (this.refs.has(command.ref))
      return this.refuse('malformed', `${command.ref} is updated twice in one push`);
    if (this.commands.length >= this.limits.commands) return this.overCommands();
    this.refs.add(command.ref);
    this.commands.push(command);
    return undefined;
  }

  private overCommands(): HeadStep {
    return this.refuse(
      'limit',
      `more than ${this.limits.commands} ref updates in one push: push them in smaller batches`,
    );
  }

  private overBytes(): HeadStep {
    return this.refuse(
      'limit',
      `the command list of this push is over ${this.limits.bytes} bytes: push the refs in smaller batches`,
    );
  }

  private refuse(why: HeadRefusal, message: string): HeadStep {
    return this.settle({ state: 'refused', why, message, capabilities: this.capabilities });
  }

  private settle(step: HeadStep): HeadStep {
    this.final = step;
    this.pending = Buffer.alloc(0);
    return step;
  }
}
