/**
 * The records the contract suites write, built from the ports' own types, and the helpers that let
 * a suite call a port the same way whether it is synchronous or asynchronous.
 */
import type { Usage } from '../../../src/core/events.js';
import type { Claim, NewDelivery, RoutedDelivery } from '../../../src/core/ports/inbox.js';
import type { LedgerEntry, Pricer } from '../../../src/core/ports/ledger.js';
import type { NewSession, SessionRecord, TurnEnd, TurnRecord } from '../../../src/core/ports/sessions.js';
import type { Ports } from './factory.js';

/**
 * Run a port call as a promise: a synchronous throw becomes a rejection, so
 * `await expect(attempt(() => …)).rejects` reads the same for a synchronous port and an async one.
 */
export const attempt = async <T>(call: () => T): Promise<Awaited<T>> => await call();

/** The LoopError code a call failed with, or `ok` when it did not fail. */
export async function outcome(call: () => unknown): Promise<string> {
  try {
    await call();
    return 'ok';
  } catch (error) {
    return String((error as { code?: unknown }).code ?? error);
  }
}

/** A secret the suites hand to the stores' scrubber; it must never come back out of a store. */
export const CANARY = 'sk-ant-canary-9f8e7d6c5b4a';
export const scrubCanary = (text: string): string => text.split(CANARY).join('[redacted]');

let n = 0;
/** A work item no other test uses (in its canonical case). */
export const workItem = (): string => `github:octo/widgets#${++n}`;

export const sessionInput = (item = workItem(), extra: Partial<NewSession> = {}): NewSession => ({
  workItem: item,
  // A slug is one work item's own: derived from it, so two work items never share one.
  slug: item.replace(/[^a-z0-9]+/g, '-'),
  engine: 'claude',
  runner: 'process',
  engineSessionId: null,
  cwd: '/work/widgets',
  credentialKind: null,
  credentialEnv: null,
  ...extra,
});

export async function openSession(ports: Ports, item = workItem()): Promise<SessionRecord> {
  return await ports.sessions.create(sessionInput(item));
}

export const turnInput = (deliveryId?: string) => ({
  promptDigest: 'sha256:abc',
  promptBytes: 12,
  meter: 'stream-json' as const,
  ...(deliveryId === undefined ? {} : { deliveryId }),
});

export const usage = (input: number, output: number): Usage => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  reasoningTokens: 0,
});

export const turnEnd = (fields: Partial<TurnEnd> = {}): TurnEnd => ({
  status: 'succeeded',
  endReason: 'result',
  endedAt: new Date().toISOString(),
  exitCode: 0,
  exitSignal: null,
  model: 'm',
  usage: usage(3, 12),
  costUsd: null,
  error: null,
  ...fields,
});

/** A turn begun and finished (succeeded). */
export async function finishedTurn(ports: Ports, session: SessionRecord): Promise<TurnRecord> {
  const turn = await ports.sessions.beginTurn(session.id, turnInput());
  return await ports.sessions.finishTurn(turn.id, turnEnd());
}

/** What the router makes of a delivery that runs a turn (or closes, ignores, rejects). */
export function routed(
  action: RoutedDelivery['action'],
  item: string,
  extra: { prompt?: string; reason?: string } = {},
): RoutedDelivery {
  switch (action) {
    case 'start':
    case 'deliver':
      return {
        action,
        workItem: item,
        repo: 'octo/widgets',
        prompt: extra.prompt ?? 'the prompt',
        engine: '',
        runner: '',
        repoPath: '/repos/widgets',
        workspace: 'checkout',
        author: 'octocat',
        trigger: 'mention @the-loop',
      };
    case 'close':
      return { action, workItem: item, repo: 'octo/widgets', reason: extra.reason ?? 'closed' };
    default:
      return { action, workItem: item, reason: extra.reason ?? `${action}d: why` };
  }
}

export const delivery = (id: string, route: RoutedDelivery, body?: string): NewDelivery => ({
  id,
  source: 'github',
  event: 'issue_comment',
  action: 'created',
  body: body ?? JSON.stringify({ delivery: id, comment: { body: '@the-loop please' } }),
  routed: route,
});

export const claimOf = (id: string, item: string, action: Claim['action'] = 'deliver'): Claim => ({
  deliveryId: id,
  workItem: item,
  action,
  source: 'github',
});

export const onlyClaims = (...claims: Claim[]) => ({ claims, held: [], ignored: [] });

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
