import { createHmac } from 'node:crypto';
import type { DriveAuditStore, DriveRecord } from '../core/ports/drives.js';
import type { UnmeteredDrive } from '../core/ports/ledger.js';
import { oneLine } from '../core/text.js';
import type { Terminal } from './backend.js';
import { tierOf } from './grant-rules.js';
import { isDriveTool } from './names.js';

/**
 * Every call is audited (who, which tool, which terminal, what came of it, and a keyed digest of its
 * payload — never the payload); every write that reached a terminal (send, run, close) is also an
 * unmetered drive in the ledger: what it made a program do is not measured, so it is shown as
 * unknown under "Not included", never as $0.
 */

export interface AccountingDeps {
  audit: DriveAuditStore;
  ledger: { recordUnmetered(drive: UnmeteredDrive): Promise<void> };
  operator: string;
  /**
   * The key payload digests are made with (per install): a digest of a short secret typed through the
   * connector (a password) cannot be reversed by trying a dictionary without it.
   */
  digestKey: Buffer;
  /** This connection's id (one per `the-loop mcp` process, or per HTTP session). */
  connection: string;
  /** The daemon's session behind a terminal name (a `loop-*` tmux session), for the drive's row. */
  agentSession(name: string): Promise<{ sessionId: string; workItem: string } | null>;
  now?: () => Date;
}

export interface CallOutcome {
  tool: string;
  /** The arguments that carry what was written (text, keys, command): digested, never stored. */
  payload: unknown;
  terminal: Terminal | null;
  outcome: 'ok' | 'error' | 'refused';
  code: string | null;
  /** One line: an exit status, a timeout, an error's message. */
  detail: string | null;
}

/** What of a call's arguments is its payload: everything but where it goes. */
export function payloadOf(args: Record<string, unknown>): unknown {
  const { target: _target, ...rest } = args;
  return rest;
}

/** HMAC-SHA256 of the payload's JSON under the install's key, and its size. */
export function digest(payload: unknown, key: Buffer): { sha256: string; bytes: number } {
  const text = JSON.stringify(payload ?? null);
  return { sha256: createHmac('sha256', key).update(text).digest('hex'), bytes: Buffer.byteLength(text) };
}

export async function account(deps: AccountingDeps, call: CallOutcome): Promise<void> {
  const at = (deps.now?.() ?? new Date()).toISOString();
  const { sha256, bytes } = digest(call.payload, deps.digestKey);
  const agent = call.terminal ? await deps.agentSession(call.terminal.name) : null;
  const record: DriveRecord = {
    at,
    operator: deps.operator,
    connection: deps.connection,
    tool: call.tool,
    backend: call.terminal?.backend ?? null,
    targetId: call.terminal?.id ?? null,
    targetName: call.terminal ? oneLine(call.terminal.name, 200) : null,
    scope: tierOf(call.tool) ?? null,
    outcome: call.outcome,
    code: call.code,
    payloadSha256: sha256,
    payloadBytes: bytes,
    detail: call.detail === null ? null : oneLine(call.detail, 300),
    workItem: agent?.workItem ?? null,
  };
  await deps.audit.record(record);
  // A refused call drove nothing; a call that failed may have written part of its payload.
  if (!isDriveTool(call.tool) || call.outcome === 'refused' || !call.terminal) return;
  await deps.ledger.recordUnmetered({
    at,
    sessionId: agent?.sessionId ?? null,
    workItem: agent?.workItem ?? null,
    turnId: null,
    engine: null,
    runner: `mcp:${call.terminal.backend}`,
    reason: `terminal connector drive (operator ${deps.operator}, ${call.tool})`,
  });
}
