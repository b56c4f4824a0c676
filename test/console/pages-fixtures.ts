/**
 * Canned wire data for the console's page test (test/console/pages.test.ts): the shapes of
 * src/console/protocol.ts and the ledger's UsageReport, with hostile strings where data is
 * untrusted (work items, error text, commands), unknown costs where nothing was priced, and a
 * partial cost (list-priced wire rows beside rows of a model with no price) on the tmux session.
 */
import type { ActView, EventView, SessionDetail, SessionRow, TurnView } from '../../src/console/protocol.js';
import type { ReportGroup, UsageReport } from '../../src/core/ports/ledger.js';

/** Markup that would run script if a page parsed data as HTML. */
export const HOSTILE = '<img src=x onerror="window.__pwned=1">';

const row = (over: Partial<SessionRow> & Pick<SessionRow, 'id' | 'workItem'>): SessionRow => ({
  engine: 'claude',
  runner: 'process',
  tmuxTarget: null,
  status: 'idle',
  heldReason: null,
  takeover: null,
  turns: 2,
  tokens: 12_345,
  costUsd: 0.42,
  unpricedRows: 0,
  unmeteredTurns: 0,
  lastTurnAt: '2025-06-01T10:05:00.000Z',
  createdAt: '2025-06-01T09:00:00.000Z',
  ...over,
});

export const ROWS: SessionRow[] = [
  row({ id: 's-priced', workItem: 'acme/app#1' }),
  row({
    id: 's-unknown',
    workItem: `acme/app#2 ${HOSTILE}`,
    engine: 'gemini',
    tokens: null,
    costUsd: null,
    unmeteredTurns: 3,
    turns: 3,
  }),
  row({
    id: 's-tmux',
    workItem: 'acme/app#3',
    runner: 'tmux',
    tmuxTarget: 'loop-acme-app-3',
    status: 'running',
    unpricedRows: 3,
  }),
  row({
    id: 's-over',
    workItem: 'acme/app#4',
    status: 'over-budget',
    heldReason: 'over budget: 1.00 of 1.00 USD per work item',
    costUsd: 1.02,
  }),
];

/** The sessions list after a live change: #1 runs now, a fifth session appeared. */
export const ROWS_LATER: SessionRow[] = [
  { ...(ROWS[0] as SessionRow), status: 'running', turns: 3 },
  ...ROWS.slice(1),
  row({ id: 's-new', workItem: 'acme/app#5', status: 'waiting', turns: 0, tokens: null, costUsd: null }),
];

/** The tmux session taken over (the banner shows it on every page). */
export const ROWS_TAKEN: SessionRow[] = ROWS.map((r) =>
  r.id === 's-tmux'
    ? {
        ...r,
        status: 'held',
        takeover: { by: 'ada@laptop', since: '2025-06-01T10:30:00.000Z', principal: 'p1' },
        heldReason: 'taken over by ada@laptop since 2025-06-01T10:30:00.000Z: hand back to go on',
      }
    : r,
);

export const ACTS: ActView[] = [
  {
    id: 1,
    at: '2025-06-01T10:01:00.000Z',
    source: 'wire',
    kind: 'api',
    tool: 'github',
    command: 'POST /repos/acme/app/pulls/1/merge',
    outcome: 'refused',
    verdict: 'deny',
    rule: 'no-merge',
    evasion: null,
    breach: true,
    workItem: 'acme/app#1',
    sessionId: 's-priced',
    turnSeq: 2,
  },
  {
    id: 2,
    at: '2025-06-01T10:02:00.000Z',
    source: 'command',
    kind: 'shell',
    tool: 'Bash',
    command: `git log ${HOSTILE}`,
    outcome: 'ran',
    verdict: 'allow',
    rule: null,
    evasion: null,
    breach: false,
    workItem: 'acme/app#1',
    sessionId: 's-priced',
    turnSeq: 2,
  },
];

const turn = (over: Partial<TurnView> & Pick<TurnView, 'id' | 'seq'>): TurnView => ({
  status: 'done',
  endReason: 'exit',
  startedAt: '2025-06-01T10:00:00.000Z',
  endedAt: '2025-06-01T10:04:00.000Z',
  meter: 'engine',
  model: 'claude-sonnet-4-5',
  usage: { inputTokens: 1000, outputTokens: 200, cacheReadTokens: 5000, cacheWriteTokens: 0 },
  costUsd: 0.21,
  costBasis: 'engine-reported',
  unpricedRows: 0,
  error: null,
  warnings: [],
  acts: [],
  ...over,
});

export function detailOf(id: string): SessionDetail | undefined {
  const session = [...ROWS_LATER].find((r) => r.id === id);
  if (!session) return undefined;
  // Metered at the wire: list-priced rows beside rows of a model with no price.
  if (id === 's-tmux') {
    const wire = { meter: 'wire', costUsd: 0.42, costBasis: 'list-price', unpricedRows: 3 };
    return { session, turns: [turn({ id: 30, seq: 1, ...wire })] };
  }
  const turns =
    id === 's-unknown'
      ? [
          turn({ id: 20, seq: 1, meter: 'none', usage: null, costUsd: null, costBasis: null, model: null }),
          turn({
            id: 21,
            seq: 2,
            status: 'failed',
            error: `engine crashed: ${HOSTILE}`,
            costUsd: null,
            costBasis: null,
          }),
        ]
      : [
          turn({ id: 10, seq: 1 }),
          turn({ id: 11, seq: 2, acts: ACTS, warnings: ['a tool call was refused'] }),
        ];
  return { session, turns };
}

/** A process session's events as they stream. */
export const EVENTS: EventView[] = [
  { turnId: 21, seq: 1, at: '2025-06-01T10:00:01.000Z', event: { type: 'text', text: `Reading ${HOSTILE}` } },
  {
    turnId: 21,
    seq: 2,
    at: '2025-06-01T10:00:02.000Z',
    event: { type: 'tool-use', id: 't1', name: 'Bash', input: { command: 'ls' } },
  },
  {
    turnId: 21,
    seq: 3,
    at: '2025-06-01T10:00:03.000Z',
    event: { type: 'tool-result', id: 't1', ok: true, summary: 'README.md' },
  },
  {
    turnId: 21,
    seq: 4,
    at: '2025-06-01T10:00:04.000Z',
    event: { type: 'usage', usage: { inputTokens: 10, outputTokens: 5 } },
  },
];

const usage = (input: number, output: number) => ({
  inputTokens: input,
  outputTokens: output,
  cacheReadTokens: 0,
  cacheCreationTokens: 0,
  reasoningTokens: 0,
});

const group = (key: string, costUsd: number | null, unpricedRows = 0): ReportGroup => ({
  key,
  rows: 4,
  turns: 2,
  usage: usage(40_000, 8_000),
  costUsd,
  unpricedRows,
  costBases: costUsd === null ? [] : ['list-price'],
});

export function usageReport(by: string): UsageReport {
  const groups =
    by === 'day'
      ? [group('2025-05-30', 0.5), group('2025-05-31', null, 4), group('2025-06-01', 1.25, 1)]
      : [group('claude', 1.75, 1), group(`gemini ${HOSTILE}`, null, 4)];
  return {
    since: '2025-05-26T00:00:00.000Z',
    until: '2025-06-02T00:00:00.000Z',
    by: by as UsageReport['by'],
    groups,
    total: { ...group('total', 1.75, 5), rows: 12, turns: 6, usage: usage(120_000, 24_000) },
    notIncluded: {
      unmetered: [
        {
          engine: 'codex',
          runner: 'tmux',
          reason: 'unmetered engine: no usage reported',
          count: 3,
          last: '2025-06-01T09:00:00.000Z',
        },
      ],
      unmeteredCount: 3,
      unpricedModels: ['mystery-model-1'],
      unpricedRows: 5,
    },
  };
}
