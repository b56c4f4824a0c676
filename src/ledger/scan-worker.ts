import { parentPort, workerData } from 'node:worker_threads';
import { pieces, type ScannedJob, scanFiles } from './scan-file.js';

/**
 * A worker thread of `usage scan`: scans its share of the files and posts the results back piece by
 * piece (the main thread inserts each while this one scans on), then says it is done. A request
 * whose copies fall into two pieces is sent twice; the main thread keeps one, with the larger
 * output count.
 */
const { jobs, metered, pieceBytes } = workerData as {
  jobs: ScannedJob[];
  metered: string[];
  pieceBytes: number;
};
const sessions = new Set(metered);
for (const piece of pieces(jobs, pieceBytes)) parentPort?.postMessage({ piece: scanFiles(piece, sessions) });
parentPort?.postMessage({ done: true });
