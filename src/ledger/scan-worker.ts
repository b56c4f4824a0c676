import { parentPort, workerData } from 'node:worker_threads';
import type { ScannedJob } from './scan-file.js';
import { JobQueue, PieceScanner } from './scan-share.js';

/**
 * A worker thread of `usage scan`: claims files from the shared queue one at a time, scans them,
 * and posts the results back piece by piece (the main thread writes each while this one scans on),
 * then says it is done. It waits before sending when `inFlight` of its pieces are still unwritten.
 */
const { jobs, shared, metered, pieceBytes, inFlight } = workerData as {
  jobs: ScannedJob[];
  shared: SharedArrayBuffer;
  metered: string[];
  pieceBytes: number;
  inFlight: number;
};
const queue = new JobQueue(jobs, shared);
const scanner = new PieceScanner(new Set(metered));
const send = () => {
  queue.waitForRoom(inFlight);
  parentPort?.postMessage({ piece: scanner.take() });
};
for (let job = queue.claim(); job !== undefined; job = queue.claim()) {
  scanner.add(job);
  if (scanner.bytes >= pieceBytes) send();
}
if (!scanner.empty) send();
parentPort?.postMessage({ done: true });
