/**
 * One composition root (issue 13): only the root files — `src/main.ts` and `src/main-*.ts` — build
 * the adapters that hold the process's resources: the database, the stores, the HTTP server, the
 * gateway, the dispatcher, the runners and the tmux client. Anyone else asks the root for them.
 *
 * A call is `openDb(…)` / `startHttpServer(…)` or `new Dispatcher(…)` …, also through a namespace
 * (`db.openDb(…)`, `new runners.Tmux(…)`); a definition (`export function openDb`, `class Tmux`) is
 * not a call. One exception: under `src/store/` a store may build its own parts (`new Sqlite…(`,
 * `new Pg…(`: the ledger's import transaction, `SqliteLedgerImport`); the store never opens a
 * database itself.
 */
import type { Violation } from './checks.js';

/** A call of a root-only factory or constructor. */
export interface RootCall {
  file: string;
  line: number;
  /** As the message shows it: `openDb(`, `new Tmux(`, `new D(` for an alias. */
  call: string;
  /** The root-only name it calls: `call`'s own, or the one an alias stands for (`Dispatcher`). */
  origin: string;
  /** What it builds: `a database`, `a tmux client`. */
  builds: string;
}

const FACTORIES: Readonly<Record<string, string>> = {
  openDb: 'a database',
  openPg: 'a database',
  openDbReadOnly: 'a database',
  startHttpServer: 'an HTTP server',
};

const CLASSES: Readonly<Record<string, string>> = {
  Dispatcher: 'a dispatcher',
  GatewayService: 'the gateway',
  ProcessRunner: 'a runner',
  Tmux: 'a tmux client',
  TmuxRunner: 'a runner',
};

/** What a call of `name` (with `new` or without) builds, if only the root may make it. */
export function rootOnly(name: string, isNew: boolean): string | null {
  if (!isNew) return Object.hasOwn(FACTORIES, name) ? (FACTORIES[name] as string) : null;
  if (Object.hasOwn(CLASSES, name)) return CLASSES[name] as string;
  if (/^Sqlite[A-Z]\w*$/.test(name)) return 'a SQLite store';
  return /^Pg[A-Z]\w*$/.test(name) ? 'a PostgreSQL store' : null;
}

/** A name only the root may call, with `new` or without. */
export function rootOnlyName(name: string): boolean {
  return rootOnly(name, true) !== null || rootOnly(name, false) !== null;
}

/** A root file: `src/main.ts` or `src/main-<part>.ts`, directly under `src/`. */
export function isRootFile(path: string): boolean {
  return /^src\/main(?:-[^/]+)?\.ts$/.test(path);
}

/** A store building its own parts (`new Sqlite…(` / `new Pg…(` under `src/store/`). */
const storeOwnPart = (hit: RootCall) =>
  hit.file.startsWith('src/store/') && hit.call.startsWith('new ') && /^(Sqlite|Pg)/.test(hit.origin);

export function rootViolations(calls: readonly RootCall[]): Violation[] {
  return calls
    .filter((hit) => !isRootFile(hit.file) && !storeOwnPart(hit))
    .map((hit) => ({
      rule: 'composition-root',
      message: `${hit.file}:${hit.line} calls ${hit.call}…)${alias(hit)}: only the composition root (src/main.ts, src/main-*.ts) builds ${hit.builds}; ask it for one`,
    }));
}

/** ` (D is Dispatcher)` when the call names a root-only constructor or factory under another name. */
function alias(hit: RootCall): string {
  const name = hit.call.replace(/^new /, '').slice(0, -1);
  return name === hit.origin ? '' : ` (${name} is ${hit.origin})`;
}
