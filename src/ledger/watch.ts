import { type FSWatcher, watch } from 'node:fs';
import { join, sep } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { describeError } from '../core/errors.js';
import type { ScanCursor } from '../core/ports/ledger.js';
import type { Logger } from '../log/logger.js';
import { type ScanDeps, type ScanSummary, scanTranscripts } from './scan.js';
import { hasLineEnd, isDirectory, regularFile, type WalkVisitor, walkTree } from './watch-fs.js';
import {
  batchesOf,
  checkFile,
  holdsTranscripts,
  isTranscriptName,
  type LookedAt,
  retryDelayMs,
  segmentsBelow,
  type WatchRoot,
} from './watch-plan.js';

/**
 * The daemon's transcript watcher: Claude Code's transcripts imported as they are written, so `the-loop
 * usage` is current without a scan. Each watched tree's directories are watched (`fs.watch`; Node 20
 * has no recursive watch on Linux: a new subdirectory gets its own watch as it appears), changes are
 * gathered for `debounceMs`, and the changed files are imported through `usage scan`'s own path
 * (`scanTranscripts`): from the same per-file cursors, with the same dedupe — complete lines only, a
 * request counted once, a truncated or replaced file read again from the start without counting
 * anything twice, and after a restart from where the last import stopped. One import runs at a time;
 * changes meanwhile wait for the next. Every tree is walked again every `recheckMs`: a backstop for
 * what file events miss (network file systems, a full inotify table, directories that appear later).
 *
 * The import runs on this thread and never in worker threads, in batches of about `batchBytes` (a
 * catch-up after downtime: the daemon answers webhooks between two batches). With no worker, a batch's
 * write transaction opens and commits within one turn of the event loop: nothing else of the daemon
 * runs while it is open.
 */

export interface TranscriptWatchDeps extends ScanDeps {
  logger: Logger;
}

export interface TranscriptWatchOptions {
  recheckMs: number;
  /** Changes are gathered this long before they are imported (a burst of appends: one import). */
  debounceMs?: number;
  /** Bytes to read in one batch (one write transaction, one turn of the event loop). */
  batchBytes?: number;
  /** Directories watched at most (each takes an inotify watch); the rest are walked by the recheck. */
  maxWatchedDirs?: number;
}

export interface WatchStatus {
  /** Watched trees that exist. */
  watching: string[];
  /** `usage.watch` directories that do not exist (yet): watched once they do. */
  missing: string[];
  /** Directories watched: the trees' roots and the subdirectories entered. */
  dirs: number;
}

/** Appends are imported this long after the first change of a burst (the goal: visible within 2 s). */
const DEBOUNCE_MS = 100;
/** About 20-60 ms of this thread per batch (bench/watch.ts: the scan reads ~0.5-1 GB/s, plus inserts). */
const BATCH_BYTES = 16 * 1024 * 1024;
/** inotify allows 8,192 watches per user on older kernels: stay well inside whatever is left. */
const MAX_WATCHED_DIRS = 4096;
/** A catch-up this large is logged when it starts and ends. */
const LARGE_BYTES = 64 * 1024 * 1024;
/** Warnings said once each (bounded: a file of garbage must not grow the set without end). */
const MAX_WARNED = 1000;

export class TranscriptWatcher {
  private readonly watchers = new Map<string, FSWatcher>();
  private readonly dirty = new Set<string>();
  private readonly looked = new Map<string, LookedAt>();
  private readonly warned = new Set<string>();
  private readonly present = new Set<WatchRoot>();
  private timer: NodeJS.Timeout | undefined;
  private recheckTimer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private failures = 0;
  private stopped = false;
  private readonly debounceMs: number;
  private readonly batchBytes: number;
  private readonly maxWatchedDirs: number;

  constructor(
    private readonly deps: TranscriptWatchDeps,
    readonly roots: readonly WatchRoot[],
    private readonly options: TranscriptWatchOptions,
  ) {
    this.debounceMs = options.debounceMs ?? DEBOUNCE_MS;
    this.batchBytes = options.batchBytes ?? BATCH_BYTES;
    this.maxWatchedDirs = options.maxWatchedDirs ?? MAX_WATCHED_DIRS;
  }

  /** Watch the trees and import what was written since the last import (in the background). */
  start(): WatchStatus {
    this.walkRoots(true);
    this.recheckTimer = setInterval(() => this.recheck(), this.options.recheckMs);
    this.recheckTimer.unref();
    this.schedule(0);
    const status = this.status();
    this.deps.logger.info('watching transcripts', { ...status });
    return status;
  }

  status(): WatchStatus {
    return {
      watching: this.roots.filter((r) => this.present.has(r)).map((r) => r.dir),
      missing: this.roots.filter((r) => r.origin === 'config' && !this.present.has(r)).map((r) => r.dir),
      dirs: this.watchers.size,
    };
  }

  /** Stop watching; an import under way ends after its batch (the rest is read at the next start). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearInterval(this.recheckTimer);
    this.timer = undefined;
    this.recheckTimer = undefined;
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    await this.running;
  }

  /** Walk every tree: watch its directories, mark its transcripts to be looked at. */
  private walkRoots(first: boolean): void {
    for (const root of this.roots) {
      if (!isDirectory(root.dir, true)) {
        if (this.present.delete(root)) this.deps.logger.info('watched directory gone', { dir: root.dir });
        else if (first && root.origin === 'config')
          this.deps.logger.warn('usage.watch: no such directory (yet): watched once it exists', {
            dir: root.dir,
            recheckSeconds: this.options.recheckMs / 1000,
          });
        continue;
      }
      if (!this.present.has(root)) {
        this.present.add(root);
        if (!first) this.deps.logger.info('watching transcripts', { dir: root.dir });
      }
      walkTree(root, root.dir, this.visitor(root));
    }
  }

  private visitor(root: WatchRoot): WalkVisitor {
    return {
      dir: (path) => {
        this.watchDir(root, path);
        return true;
      },
      file: (path) => this.dirty.add(path),
      error: (path, error) => this.warnOnce(`unreadable directory ${path}`, { code: error.code }),
    };
  }

  private watchDir(root: WatchRoot, dir: string): void {
    if (this.stopped || this.watchers.has(dir)) return;
    if (this.watchers.size >= this.maxWatchedDirs) {
      this.warnOnce('too many directories to watch: the others are walked every recheck', {
        max: this.maxWatchedDirs,
      });
      return;
    }
    try {
      const watcher = watch(dir, { persistent: false }, (event, name) =>
        this.onEvent(root, dir, event, typeof name === 'string' ? name : null),
      );
      // The directory went away (or the watch broke): the recheck finds it again if it comes back.
      watcher.on('error', () => this.unwatch(dir));
      this.watchers.set(dir, watcher);
    } catch (error) {
      // ENOSPC: the inotify table is full; the recheck still walks the directory.
      this.warnOnce(`cannot watch ${dir}`, { error: describeError(error) });
    }
  }

  private unwatch(below: string): void {
    for (const [dir, watcher] of this.watchers) {
      if (dir === below || dir.startsWith(`${below}${sep}`)) {
        watcher.close();
        this.watchers.delete(dir);
      }
    }
  }

  private onEvent(root: WatchRoot, dir: string, event: string, name: string | null): void {
    if (this.stopped) return;
    if (name === null) {
      // No name given: look at the whole directory again.
      walkTree(root, dir, this.visitor(root));
    } else {
      const path = join(dir, name);
      const segments = segmentsBelow(root, dir);
      if (isTranscriptName(name) && segments && holdsTranscripts(root, segments)) this.dirty.add(path);
      else if (event === 'rename') {
        // A directory made or moved in: watched, and the transcripts already in it read. Gone: unwatched.
        if (isDirectory(path, false)) walkTree(root, path, this.visitor(root));
        else this.unwatch(path);
      }
    }
    if (this.dirty.size > 0) this.schedule(this.debounceMs);
  }

  private recheck(): void {
    if (this.stopped) return;
    this.walkRoots(false);
    this.schedule(this.debounceMs);
  }

  /** One import at a time: a change while one runs waits for the next (scheduled when it ends). */
  private schedule(delayMs: number): void {
    if (this.stopped || this.timer || this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.running = this.importDirty()
        .then(
          () => {
            if (this.failures > 0) this.deps.logger.info('transcript import works again');
            this.failures = 0;
          },
          (error: unknown) => {
            this.failures += 1;
            if (this.failures === 1)
              this.deps.logger.warn('transcript import failed: retried', { error: describeError(error) });
          },
        )
        .finally(() => {
          this.running = undefined;
          if (this.dirty.size > 0)
            this.schedule(retryDelayMs(this.failures, this.debounceMs, this.options.recheckMs));
        });
    }, delayMs);
    this.timer.unref();
  }

  private async importDirty(): Promise<void> {
    const paths = [...this.dirty];
    this.dirty.clear();
    let jobs: Array<{ path: string; bytes: number }>;
    try {
      jobs = this.changed(paths, await this.deps.cursors.all());
    } catch (error) {
      for (const p of paths) this.dirty.add(p);
      throw error;
    }
    const total = jobs.reduce((n, j) => n + j.bytes, 0);
    const large = total >= LARGE_BYTES;
    if (large) this.deps.logger.info('importing transcripts', { files: jobs.length, bytes: total });
    const started = Date.now();
    let added = 0;
    const batches = batchesOf(jobs, this.batchBytes);
    for (const [i, batch] of batches.entries()) {
      // Stopping: what is left is read at the next start, from the cursors.
      if (this.stopped) return;
      try {
        const summary = await scanTranscripts(
          this.deps,
          this.roots.map((r) => r.dir),
          { files: batch.map((j) => j.path), threadThresholdBytes: Number.POSITIVE_INFINITY },
        );
        added += summary.added;
        this.report(summary);
      } catch (error) {
        for (const b of batches.slice(i)) for (const j of b) this.dirty.add(j.path);
        throw error;
      }
      // Webhooks, turns and the console go first between two batches.
      await nextTurn();
    }
    const fields = { files: jobs.length, bytes: total, added, ms: Date.now() - started };
    if (large) this.deps.logger.info('transcripts imported', fields);
    else if (added > 0) this.deps.logger.debug('transcripts imported', fields);
  }

  /** The files with something new to import, and how many bytes each has to read. */
  private changed(
    paths: readonly string[],
    known: ReadonlyMap<string, ScanCursor>,
  ): Array<{ path: string; bytes: number }> {
    const jobs: Array<{ path: string; bytes: number }> = [];
    for (const path of paths) {
      const file = regularFile(path);
      if (!file) {
        this.looked.delete(path);
        continue;
      }
      const cursor = known.get(path);
      const check = checkFile(cursor, file, this.looked.get(path));
      if (check.kind === 'unchanged') continue;
      if (check.kind === 'look' && cursor && !hasLineEnd(path, check.from, check.to)) {
        // Its last line is still being written: looked through this far, imported once it ends.
        this.looked.set(path, { inode: file.ino, offset: cursor.offset, to: check.to });
        continue;
      }
      this.looked.delete(path);
      const from = cursor && cursor.inode === file.ino && cursor.offset <= file.size ? cursor.offset : 0;
      jobs.push({ path, bytes: file.size - from });
    }
    return jobs;
  }

  private report(summary: ScanSummary): void {
    for (const warning of summary.warnings.slice(0, 5)) this.warnOnce('transcript line skipped', { warning });
    for (const u of summary.unreadable) this.warnOnce('unreadable transcript', { file: u });
    if (summary.restarted > 0)
      this.deps.logger.info('transcripts shrank or were replaced: read again from the start', {
        files: summary.restarted,
      });
  }

  private warnOnce(message: string, fields: Record<string, unknown>): void {
    const key = `${message} ${JSON.stringify(fields)}`;
    if (this.warned.has(key)) return;
    if (this.warned.size >= MAX_WARNED) this.warned.clear();
    this.warned.add(key);
    this.deps.logger.warn(message, fields);
  }
}
