/**
 * Several hosts sharing a PostgreSQL store (part of the composition root, beside main.ts): this
 * host's lease keeper, started with what it offers, and the LISTEN connection that wakes the
 * dispatcher when another host accepts work. On SQLite (one host) there is neither.
 */
import pg from 'pg';
import type { LoadedConfig } from './config/load-types.js';
import type { Dispatcher } from './dispatch/dispatcher.js';
import type { PlacementNeeds } from './dispatch/placement-rules.js';
import { whichBinary } from './engines/which.js';
import { InboxListener } from './hosts/listener.js';
import type { App } from './main.js';

export interface HostsHandle {
  /** Stop listening, then leave (leases released, status down). */
  stop(): Promise<void>;
}

/**
 * What this host offers: the configured labels (with `tmux` when tmux is installed), the engines
 * whose binaries resolve on its PATH, its capacity (default: the dispatch concurrency), its address.
 */
export function hostOffer(
  loaded: LoadedConfig,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
) {
  const store = loaded.config.store;
  if (store.kind !== 'postgres') throw new Error('hostOffer: only a PostgreSQL store has hosts');
  const tmux = whichBinary('tmux', env.PATH, cwd) ? ['tmux'] : [];
  const labels = [...new Set([...store.labels, ...tmux])].sort();
  const engines = Object.entries(loaded.engines)
    .filter(([, preset]) => whichBinary(preset.binary, env.PATH, cwd) !== null)
    .map(([name]) => name)
    .sort();
  return {
    labels,
    engines,
    capacity: store.capacity ?? loaded.config.dispatch.concurrency,
    address: store.address ?? null,
  };
}

/** What a delivery's session needs of its host: its plan's engine, and tmux for a tmux runner. */
async function needsOf(app: App, deliveryId: string): Promise<PlacementNeeds> {
  const { defaults } = app.loaded.config;
  const plan = await app.inbox.plan(deliveryId);
  const engine = plan?.engine || defaults.engine;
  const runner = plan?.runner || defaults.runner;
  return { engine, labels: runner === 'tmux' ? ['tmux'] : [] };
}

/**
 * Register this host and keep its leases (heartbeats, the reaper), and LISTEN for the inbox's
 * notifications. undefined when the store has no keeper (SQLite, or not the daemon).
 */
export async function startHosts(
  app: App,
  dispatcher: Dispatcher,
  env: Readonly<Record<string, string | undefined>>,
  cwd: string,
): Promise<HostsHandle | undefined> {
  const { keeper, url } = app.stores;
  if (!keeper || !url) return undefined;
  const offer = hostOffer(app.loaded, env, cwd);
  const interrupt = app.stores.interruptAbandoned?.bind(app.stores);
  await keeper.start({
    info: { ...offer, address: offer.address ?? keeper.host },
    logger: app.logger,
    needsOf: (deliveryId) => needsOf(app, deliveryId),
    hasActiveSession: async (workItem) => (await app.store.findActive(workItem)) !== undefined,
    // Process-runner engines stop now; a tmux turn detaches (its session runs on, its lease lapses).
    onFenced: () => dispatcher.abortRunning(),
    interruptAbandoned: async (abandoned) => {
      await interrupt?.(abandoned);
      dispatcher.notify();
    },
    ...(app.stores.reapAbandoned ? { reapAbandoned: app.stores.reapAbandoned.bind(app.stores) } : {}),
    onReaped: () => dispatcher.notify(),
    ...(app.stores.settleStranded ? { settleStranded: app.stores.settleStranded.bind(app.stores) } : {}),
  });
  const listener = new InboxListener({
    client: () =>
      new pg.Client({ connectionString: url, application_name: `the-loop ${keeper.host} listen` }),
    onNotify: () => dispatcher.notifySoon(),
    logger: app.logger,
  });
  await listener.start();
  return {
    stop: async () => {
      await listener.stop();
      await keeper.leave().catch((error: unknown) => app.logger.warn('leaving the hosts failed', { error }));
    },
  };
}
