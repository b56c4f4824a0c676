import { parentPort, workerData } from 'node:worker_threads';
import { type FileScan, type ScannedRecord, scanFile } from './scan-file.js';

/** A worker thread of `usage scan`: scans its share of the files and posts the results back. */
export interface ScanJob {
  path: string;
  offset: number;
  inode?: number | undefined;
}

export type ScanResult = { path: string; scan: FileScan } | { path: string; error: string };

const { jobs, metered } = workerData as { jobs: ScanJob[]; metered: string[] };
const meteredSessions = new Set(metered);
const results: ScanResult[] = [];
// One key set for all files of this thread: copies across files (a resumed session repeats its
// history) are dropped here already.
const seen = new Map<string, ScannedRecord>();
for (const job of jobs) {
  try {
    results.push({ path: job.path, scan: await scanFile(job.path, job, seen, meteredSessions) });
  } catch (error) {
    results.push({ path: job.path, error: (error as NodeJS.ErrnoException).code ?? String(error) });
  }
}
parentPort?.postMessage(results);
