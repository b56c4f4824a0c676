import type { Command } from 'commander';
import { LoopError } from '../core/errors.js';
import type { HostRecord } from '../core/ports/hosts.js';
import type { Base } from '../main-base.js';
import { formatDuration, table, toJson } from './format.js';
import { EXIT, type Io } from './io.js';
import type { ProgramContext } from './program-context.js';

/** A host as `hosts list --json` prints it. */
function asJson(h: HostRecord) {
  return {
    id: h.id,
    status: h.status,
    heartbeatAgeSeconds: Math.round(h.silentSeconds * 10) / 10,
    heartbeatAt: h.heartbeatAt,
    startedAt: h.startedAt,
    incarnation: h.incarnation,
    leases: h.leases,
    moving: h.moving,
    capacity: h.capacity,
    labels: h.labels,
    engines: h.engines,
    address: h.address,
  };
}

/** `hosts list`: every host sharing the PostgreSQL store, by the database's clock. */
async function hostsList(base: Base, io: Io, opts: { json?: boolean }): Promise<number> {
  const { hosts } = base.stores;
  if (!hosts)
    throw new LoopError(
      'usage',
      'hosts list reads the hosts sharing a PostgreSQL store, and this config uses SQLite',
      {
        hint: 'With SQLite one host runs everything; set store: { kind: postgres, url: env:THE_LOOP_DATABASE_URL } to share a store.',
      },
    );
  const list = await hosts.list();
  if (opts.json) {
    io.out(`${toJson(list.map(asJson), 2)}\n`);
    return EXIT.ok;
  }
  if (list.length === 0) {
    io.out('no host has registered with this store yet (a daemon registers when it starts).\n');
    return EXIT.ok;
  }
  io.out(
    table(
      ['host', 'status', 'heartbeat', 'leases', 'labels', 'engines', 'address'],
      list.map((h) => [
        h.id,
        h.status,
        `${formatDuration(h.silentSeconds * 1000)} ago`,
        `${h.leases}/${h.capacity}${h.moving > 0 ? ` (${h.moving} moving)` : ''}`,
        h.labels.join(',') || '-',
        h.engines.join(',') || '-',
        h.address ?? '-',
      ]),
    ),
  );
  return EXIT.ok;
}

export function addHostsCommands(program: Command, { io, withBase }: ProgramContext): void {
  const hosts = program
    .command('hosts')
    .description('the hosts sharing a PostgreSQL store, and their leases');
  hosts
    .command('list')
    .description(
      'every host: status, heartbeat age (by the database clock), leases/capacity (and how many are being moved away), labels, engines, address',
    )
    .option('--json', 'JSON output')
    .action(async (opts, cmd: Command) => withBase(cmd, (base) => hostsList(base, io, opts)));
}
