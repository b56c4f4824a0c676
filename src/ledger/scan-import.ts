import type { Usage } from '../core/events.js';
import type { LedgerEntry, LedgerImport, Pricer } from '../core/ports/ledger.js';
import { type Payer, sessionPayer } from './payer.js';
import type { FileScan, ScannedRecord, ScanResult } from './scan-file.js';
import { type OwnSession, PER_TURN_METERS, type SizedJob } from './scan-jobs.js';

/** What `usage scan` read and did. */
export interface ScanSummary {
  dirs: string[];
  files: number;
  filesRead: number;
  bytesRead: number;
  records: number;
  added: number;
  /**
   * Records that are copies of a request found earlier in this same scan: a message's other content
   * blocks, its streamed copies, the same request in another file (a fork, a resumed session).
   */
  copies: number;
  /** Requests already in the ledger before this scan (re-reads, the tmux runner's own rows). */
  duplicates: number;
  /** Records of sessions metered per turn from result events (not added again). */
  alreadyMetered: number;
  skippedLines: number;
  restarted: number;
  unreadable: string[];
  warnings: string[];
  /** Threads that scanned, this one included (0: too little to read for threads; this one alone). */
  workers: number;
  ms: number;
}

export function emptySummary(dirs: string[], files: number, workers: number): ScanSummary {
  return {
    dirs,
    files,
    filesRead: 0,
    bytesRead: 0,
    records: 0,
    added: 0,
    copies: 0,
    duplicates: 0,
    alreadyMetered: 0,
    skippedLines: 0,
    restarted: 0,
    unreadable: [],
    warnings: [],
    workers,
    ms: 0,
  };
}

const UNKNOWN_PAYER: Payer = { kind: 'unknown', id: null };

/**
 * Scanned results into the ledger, piece by piece, as soon as they are there: one row per request
 * (its key), with the largest output count seen. A request another thread finds later with a larger
 * output count corrects its row; one that turns out to be metered per turn (a fork's copy read
 * first) is taken out again.
 */
export class TranscriptImport {
  /** The output count recorded for each request so far, by key (records are let go once inserted). */
  private readonly unique = new Map<string, number>();
  /** Requests of sessions this installation meters per turn, wherever a copy of them appears. */
  private readonly meteredKeys = new Set<string>();
  private readonly countedMetered = new Set<string>();
  readonly cursors: Array<{ path: string; scan: FileScan }> = [];
  private readonly startedAt: Map<string, SizedJob>;
  /** Whether any of this installation's sessions is metered per turn (else no record is looked up). */
  private readonly anyMetered: boolean;

  constructor(
    private readonly writes: LedgerImport,
    private readonly price: (warnings: Set<string>) => Pricer,
    private readonly sessions: ReadonlyMap<string, OwnSession>,
    jobs: readonly SizedJob[],
    readonly summary: ScanSummary,
  ) {
    this.startedAt = new Map(jobs.map((j) => [j.path, j]));
    this.anyMetered = [...sessions.values()].some((s) => PER_TURN_METERS.has(s.lastMeter ?? ''));
  }

  /** One piece of results: tallied, then written in the import's (batched) transaction. */
  async take(results: readonly ScanResult[]): Promise<void> {
    const nowMetered = this.markMetered(results);
    const { fresh, grown } = this.tally(results);
    for (const key of nowMetered) this.unimportMetered(key);
    const warnings = new Set<string>();
    const written = await this.writes.write(
      { add: this.entries(fresh), correct: this.entries(grown), remove: nowMetered },
      this.price(warnings),
    );
    this.summary.added += written.added - written.removedOwn;
    this.summary.warnings.push(...warnings);
  }

  /** Keys of per-turn-metered sessions; those already imported (from a fork's copy) are returned. */
  private markMetered(results: readonly ScanResult[]): string[] {
    const nowMetered: string[] = [];
    if (!this.anyMetered) return nowMetered;
    for (const r of results) {
      if ('error' in r) continue;
      for (const record of r.scan.records) {
        const key = record[0];
        if (!PER_TURN_METERS.has(this.sessions.get(record[1])?.lastMeter ?? '') || this.meteredKeys.has(key))
          continue;
        this.meteredKeys.add(key);
        if (this.unique.has(key)) nowMetered.push(key);
      }
    }
    return nowMetered;
  }

  private tally(results: readonly ScanResult[]): { fresh: ScannedRecord[]; grown: ScannedRecord[] } {
    const fresh: ScannedRecord[] = [];
    const grown: ScannedRecord[] = [];
    const summary = this.summary;
    for (const r of results) {
      if ('error' in r) {
        summary.unreadable.push(`${r.path}: ${r.error}`);
        continue;
      }
      const { scan } = r;
      // Only where the file was read up to is kept: its records are let go once written.
      this.cursors.push({ path: r.path, scan: { ...scan, records: [], warnings: [] } });
      summary.filesRead += 1;
      summary.bytesRead += scan.restarted ? scan.size : scan.size - (this.startedAt.get(r.path)?.offset ?? 0);
      summary.skippedLines += scan.skipped;
      summary.records += scan.duplicates;
      summary.copies += scan.duplicates;
      if (scan.restarted) summary.restarted += 1;
      summary.warnings.push(...scan.warnings);
      for (const record of scan.records) this.sort(record, fresh, grown);
    }
    return { fresh, grown };
  }

  private sort(record: ScannedRecord, fresh: ScannedRecord[], grown: ScannedRecord[]): void {
    const key = record[0];
    // Claude Code's own notices (API errors, "No response requested.") are not requests.
    if (record[3] === '<synthetic>') return;
    this.summary.records += 1;
    // The same key from another thread's files: one row, with the largest output count.
    const earlier = this.unique.get(key);
    if (earlier !== undefined) {
      this.summary.copies += 1;
      // Its row takes the larger count (the ledger keeps the largest output of a source id).
      if (record[5] > earlier) {
        this.unique.set(key, record[5]);
        grown.push(record);
      }
      return;
    }
    // Metered per turn already — also when a copy of it sits in another session's file (a fork).
    // Counted once per request; its other copies are duplicates.
    if (this.meteredKeys.size > 0 && this.meteredKeys.has(key)) {
      if (!this.countedMetered.has(key)) {
        this.countedMetered.add(key);
        this.summary.alreadyMetered += 1;
      } else this.summary.copies += 1;
      return;
    }
    this.unique.set(key, record[5]);
    fresh.push(record);
  }

  /** A key imported earlier that turns out to be metered per turn: counted as such, its row taken out. */
  private unimportMetered(key: string): void {
    this.unique.delete(key);
    this.countedMetered.add(key);
    this.summary.alreadyMetered += 1;
  }

  /**
   * Ledger entries, one at a time as they are written: one entry object, filled again for each
   * record (the store reads each as it writes it, and keeps none) — none are held, none allocated.
   */
  private *entries(records: readonly ScannedRecord[]): Generator<LedgerEntry> {
    const usage: Usage = {
      inputTokens: 0,
      outputTokens: 0,
      cacheReadTokens: 0,
      cacheCreationTokens: 0,
      reasoningTokens: 0,
      cacheCreation1hTokens: undefined,
    };
    const e: LedgerEntry = {
      meter: 'transcript',
      sourceId: '',
      at: '',
      sessionId: null,
      workItem: null,
      turnId: null,
      engine: 'claude',
      runner: null,
      model: null,
      usage,
      payer: UNKNOWN_PAYER,
    };
    const own = this.sessions.size > 0;
    for (const [key, sessionId, at, model, input, output, cacheRead, cacheCreation, oneHour] of records) {
      const ours = own ? this.sessions.get(sessionId) : undefined;
      e.sourceId = key;
      e.at = at;
      e.sessionId = ours?.id ?? null;
      e.workItem = ours?.workItem ?? null;
      e.engine = ours?.engine ?? 'claude';
      e.runner = ours?.runner ?? null;
      e.model = model || null;
      e.payer = ours ? sessionPayer(ours.credentialKind, ours.payerId) : UNKNOWN_PAYER;
      usage.inputTokens = input;
      usage.outputTokens = output;
      usage.cacheReadTokens = cacheRead;
      usage.cacheCreationTokens = cacheCreation;
      usage.cacheCreation1hTokens = oneHour > 0 ? oneHour : undefined;
      yield e;
    }
  }
}
