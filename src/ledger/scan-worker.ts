import { parentPort, workerData } from 'node:worker_threads';
import { type ScanJob, scanFiles } from './scan-file.js';

/** A worker thread of `usage scan`: scans its share of the files and posts the results back. */
const { jobs, metered } = workerData as { jobs: ScanJob[]; metered: string[] };
parentPort?.postMessage(scanFiles(jobs, new Set(metered)));
