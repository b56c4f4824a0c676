/**
 * What the port contract suites run against: one store's implementation of each port, over one
 * registry that can be closed and opened again (a restart), with the session store to make the
 * sessions and turns the other tables refer to. A future store (PostgreSQL) gives its own world and
 * must pass the same suites.
 */
import type { ActStore } from '../../../src/core/ports/acts.js';
import type { BudgetStore } from '../../../src/core/ports/budgets.js';
import type { LedgerEntry, LedgerStore, Pricer, ScanCursorStore } from '../../../src/core/ports/ledger.js';
import type { SessionRecord, SessionStore, TurnRecord } from '../../../src/core/ports/sessions.js';
import type { TokenStore } from '../../../src/core/ports/tokens.js';

export interface PortWorld {
  sessions: SessionStore;
  ledger: LedgerStore;
  acts: ActStore;
  budgets: BudgetStore;
  tokens: TokenStore;
  cursors: ScanCursorStore;
  /** The same registry, closed and opened again (what a restarted daemon sees). */
  reopen(): Promise<PortWorld>;
  /** A second connection to the same registry (another process), closed with the world. */
  another(): Promise<PortWorld>;
  close(): Promise<void>;
}

/** Opens a fresh world (an empty registry); `scrub` masks what the stores scrub. */
export type OpenWorld = (options: { scrub: (text: string) => string }) => Promise<PortWorld>;

let n = 0;
export function newSession(
  world: PortWorld,
  workItem = `github:octo/widgets#${++n}`,
): Promise<SessionRecord> {
  return world.sessions.create({
    workItem,
    slug: `github-octo-widgets-${n}-${Math.random().toString(36).slice(2, 8)}`,
    engine: 'claude',
    runner: 'process',
    engineSessionId: null,
    cwd: '/',
    credentialKind: null,
    credentialEnv: null,
  });
}

export async function newTurn(world: PortWorld, session: SessionRecord): Promise<TurnRecord> {
  const turn = await world.sessions.beginTurn(session.id, {
    promptDigest: 'd',
    promptBytes: 1,
    meter: 'stream-json',
  });
  return world.sessions.finishTurn(turn.id, {
    status: 'succeeded',
    endReason: 'result',
    endedAt: new Date().toISOString(),
    exitCode: 0,
    exitSignal: null,
    model: null,
    usage: null,
    costUsd: null,
    error: null,
  });
}

export const usage = (input: number, output: number) => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  reasoningTokens: 0,
});

export function entry(e: Partial<LedgerEntry> & Pick<LedgerEntry, 'sourceId'>): LedgerEntry {
  return {
    meter: 'transcript',
    at: '2026-03-01T10:00:00.000Z',
    sessionId: null,
    workItem: null,
    turnId: null,
    engine: 'claude',
    runner: 'process',
    model: 'm',
    usage: usage(10, 5),
    payer: { kind: 'unknown', id: null },
    ...e,
  };
}

/** A price of one dollar per output token, list-priced (corrections are repriced per token). */
export const perOutputToken: Pricer = (e) => ({
  costUsd: e.usage.outputTokens,
  basis: 'list-price',
  priceKey: 'm@test',
  outputUnit: 1,
});
