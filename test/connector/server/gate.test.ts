import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Connection } from '../../../src/connector/connection.js';
import { createConnectorServer } from '../../../src/connector/server.js';
import { TmuxBackend } from '../../../src/connector/tmux/tmux-backend.js';
import { TOOL_DEFS, type ToolDef } from '../../../src/connector/tool-defs.js';
import { type Db, openDb } from '../../../src/store/db.js';
import { SqliteDriveAudit } from '../../../src/store/sqlite/drive-audit.js';
import { SqliteLedgerStore } from '../../../src/store/sqlite/ledger.js';
import { call, privateTmux } from '../../helpers/mcp.js';

/**
 * The one gate: a tool registered without a tier (a future tool someone forgot to classify) is
 * denied before its handler could run — and the refusal is audited like any other.
 */

const tmux = privateTmux();
const dir = mkdtempSync(join(tmpdir(), 'the-loop-gate-'));
let db: Db;
let client: Client;
let audit: SqliteDriveAudit;

beforeAll(async () => {
  await tmux.session('work-a');
  db = openDb(join(dir, 'the-loop.db'));
  audit = new SqliteDriveAudit(db, { scrub: (t) => t });
  const backend = new TmuxBackend({ socket: tmux.socket });
  const connection: Connection = {
    grant: {
      operator: 'ops',
      backends: ['tmux'],
      scope: 'destroy',
      targets: { kind: 'any' },
      tools: ['list_terminals', 'read_terminal', 'send_input', 'run_command', 'close_terminal'],
      run: { timeoutSeconds: 10, maxOutputLines: 100, inPane: false },
    },
    binding: null,
    backends: new Map([['tmux', backend]]),
    accounting: {
      audit,
      ledger: new SqliteLedgerStore(db),
      operator: 'ops',
      digestKey: Buffer.alloc(32, 7),
      connection: 'test',
      agentSession: async () => null,
    },
    protectedNames: async () => new Set(),
    scrub: (t) => t,
    onInternalError: (tool, error) => {
      throw new Error(`${tool}: ${String(error)}`);
    },
  };
  const send = TOOL_DEFS.find((d) => d.name === 'send_input') as ToolDef;
  // Two tools with no tier (the SDK itself refuses a prototype key such as toString as a name).
  const rogue = [
    { ...send, name: 'type_anything' },
    { ...send, name: 'send_input_v2' },
  ] as unknown as ToolDef[];
  const server = createConnectorServer(connection, { version: 'test' }, [...TOOL_DEFS, ...rogue]);
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  client = new Client({ name: 'gate-test', version: '1' });
  await client.connect(clientSide);
}, 30_000);

afterAll(async () => {
  await client?.close();
  db?.close();
  await tmux.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('the gate', () => {
  it('denies a tool that has no tier, before anything is sent', async () => {
    const before = await tmux.capture('work-a');
    for (const name of ['type_anything', 'send_input_v2']) {
      const result = await call(client, name, { target: 'work-a', text: 'echo rogue', keys: ['Enter'] });
      expect(result.code, name).toBe('E_SCOPE');
      expect(result.text).toContain('no tier');
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(await tmux.capture('work-a')).toBe(before);
    const rows = await audit.list({ limit: 10 });
    expect(rows.map((r) => [r.tool, r.outcome])).toEqual([
      ['send_input_v2', 'refused'],
      ['type_anything', 'refused'],
    ]);
  });

  it('lets a classified tool through the same gate', async () => {
    const listed = await call(client, 'list_terminals', {});
    expect(listed.isError).toBe(false);
  });
});
