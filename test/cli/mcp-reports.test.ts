/**
 * `the-loop mcp grants` and `the-loop mcp audit` over a real SQLite registry: each declared
 * operator with its calls and drives, the audit newest first with its filters, payloads shown as a
 * digest only, output through the scrubbing io, hostile names unable to drive the terminal.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type Io, scrubbingIo, showingIo } from '../../src/cli/io.js';
import { addMcpReportCommands } from '../../src/cli/mcp.js';
import {
  describeTargets,
  type McpReportBase,
  mcpAuditCommand,
  mcpGrantsCommand,
} from '../../src/cli/mcp-reports.js';
import { connectorSchema } from '../../src/config/connector-schema.js';
import type { DriveRecord } from '../../src/core/ports/drives.js';
import { type Db, openDb } from '../../src/store/db.js';
import { SqliteDriveAudit } from '../../src/store/sqlite/drive-audit.js';

const SECRET = 'sk-ant-canary-4242424242';

let dir: string;
let db: Db;
let drives: SqliteDriveAudit;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-mcp-reports-'));
  db = openDb(join(dir, 'the-loop.db'));
  drives = new SqliteDriveAudit(db, { scrub: (t) => t });
});
afterEach(() => {
  if (db.open) db.close();
  rmSync(dir, { recursive: true, force: true });
});

function capture(): { io: Io; out: () => string } {
  let text = '';
  const io: Io = { out: (t) => (text += t), err: (t) => (text += t), cwd: dir, env: {} };
  return { io, out: () => text };
}

const at = (minute: number) => new Date(Date.UTC(2026, 2, 1, 10, minute)).toISOString();
const sha = (text: string) => createHash('sha256').update(text).digest('hex');
const drive = (minute: number, extra: Partial<DriveRecord> = {}): DriveRecord => ({
  at: at(minute),
  operator: 'ops',
  connection: 'c-1',
  tool: 'send_input',
  backend: 'tmux',
  targetId: '%3',
  targetName: 'loop-a',
  scope: 'write',
  outcome: 'ok',
  code: null,
  payloadSha256: sha(`p${minute}`),
  payloadBytes: 17,
  detail: null,
  workItem: null,
  ...extra,
});

const connector = connectorSchema.parse({
  operators: {
    ops: { scope: 'write', targets: { prefixes: ['loop-'] }, run: { inPane: true } },
    watcher: { targets: { session: 'github:Octo/W#1' }, tools: ['read_terminal'] },
  },
});

describe('mcp grants', () => {
  it('shows each operator with its ceiling, calls, drives and last drive', async () => {
    await drives.record(drive(1));
    await drives.record(drive(2, { tool: 'read_terminal', scope: 'read' }));
    await drives.record(drive(3, { outcome: 'refused', code: 'E_TARGET_NOT_BOUND' }));
    const { io, out } = capture();
    expect(await mcpGrantsCommand({ connector, drives }, io, {})).toBe(0);
    const text = out();
    expect(text).toMatch(/^2 operators \(connector\.operators\)/);
    const ops = text.split('\n').find((l) => l.startsWith('ops ')) ?? '';
    expect(ops).toMatch(
      /tmux\s+write\s+names starting "loop-"\s+all within write\s+60 s, 2000 lines, in pane\s+3\s+1\s+2026-03-01 10:01:00/,
    );
    const watcher = text.split('\n').find((l) => l.startsWith('watcher ')) ?? '';
    expect(watcher).toMatch(
      /read\s+the session of github:octo\/w#1\s+read_terminal\s+60 s, 2000 lines\s+0\s+0\s+never/,
    );
  });

  it('JSON: the grants as Grants, with counts; operators the audit holds but the config no longer declares', async () => {
    await drives.record(drive(1, { operator: 'retired' }));
    const { io, out } = capture();
    await mcpGrantsCommand({ connector, drives }, io, { json: true });
    const rows = JSON.parse(out());
    expect(rows).toHaveLength(3);
    expect(rows[0]).toEqual({
      operator: 'ops',
      backends: ['tmux'],
      scope: 'write',
      targets: { kind: 'prefix', prefixes: ['loop-'] },
      tools: ['list_terminals', 'read_terminal', 'send_input', 'run_command'],
      run: { timeoutSeconds: 60, maxOutputLines: 2000, inPane: true },
      declared: true,
      calls: 0,
      drives: 0,
      lastAt: null,
      lastDriveAt: null,
    });
    expect(rows[2]).toEqual({
      operator: 'retired',
      declared: false,
      calls: 1,
      drives: 1,
      lastAt: at(1),
      lastDriveAt: at(1),
    });
    const text = capture();
    await mcpGrantsCommand({ connector, drives }, text.io, {});
    expect(text.out()).toMatch(/no longer declared:\n {2}retired: 1 calls, 1 drives/);
  });

  it('with no operator declared, says the connector will not start and how to declare one', async () => {
    const { io, out } = capture();
    await mcpGrantsCommand({ connector: connectorSchema.parse({}), drives }, io, {});
    expect(out()).toMatch(/No operator declared: `the-loop mcp` refuses to start.*connector\.operators/);
  });

  it('describes every target form', () => {
    expect(describeTargets({ kind: 'any' })).toBe('any terminal');
    expect(describeTargets({ kind: 'single', name: 'work' })).toBe('only "work" (bound at start)');
    expect(describeTargets({ kind: 'prefix', prefixes: ['a-', 'b-'] })).toBe('names starting "a-" or "b-"');
  });
});

describe('mcp audit', () => {
  it('lists calls newest first with target, outcome, payload digest and size — never a payload', async () => {
    await drives.record(drive(1, { detail: 'sent 17 bytes' }));
    await drives.record(
      drive(2, { tool: 'run_command', outcome: 'error', code: 'E_TIMEOUT', detail: 'timed out after 60 s' }),
    );
    await drives.record(
      drive(3, { tool: 'list_terminals', targetId: null, targetName: null, payloadSha256: null }),
    );
    const { io, out } = capture();
    expect(await mcpAuditCommand({ drives }, io, {}, new Date(at(10)))).toBe(0);
    const lines = out().split('\n');
    expect(lines[0]).toBe('3 calls · 0 refused');
    expect(lines[2]).toMatch(/^WHEN\s+OPERATOR\s+TOOL\s+TARGET\s+OUTCOME\s+PAYLOAD\s+DETAIL$/);
    expect(lines[3]).toMatch(/^2026-03-01 10:03:00\s+ops\s+list_terminals\s+-\s+ok\s+-$/);
    expect(lines[4]).toMatch(
      new RegExp(
        `10:02:00\\s+ops\\s+run_command\\s+loop-a \\(%3\\)\\s+error E_TIMEOUT\\s+${sha('p2').slice(0, 12)} 17 B\\s+timed out after 60 s`,
      ),
    );
    expect(out()).not.toContain(sha('p2').slice(0, 13));
  });

  it('filters by since, until and operator, bounds by limit, and says when it cut', async () => {
    for (let m = 0; m < 6; m++) await drives.record(drive(m, { operator: m < 3 ? 'early' : 'late' }));
    const now = new Date(at(10));
    const json = async (opts: Parameters<typeof mcpAuditCommand>[2]) => {
      const { io, out } = capture();
      await mcpAuditCommand({ drives }, io, { ...opts, json: true }, now);
      return (JSON.parse(out()) as DriveRecord[]).map((r) => r.at);
    };
    expect(await json({ since: '8m' })).toEqual([at(5), at(4), at(3), at(2)]);
    expect(await json({ until: '2026-03-01T10:02:00Z' })).toEqual([at(1), at(0)]);
    expect(await json({ operator: 'early' })).toEqual([at(2), at(1), at(0)]);
    expect(await json({ limit: 2 })).toEqual([at(5), at(4)]);
    const { io, out } = capture();
    await mcpAuditCommand({ drives }, io, { limit: 2 }, now);
    expect(out()).toMatch(/^2 calls \(the newest 2; --limit for more\)/);
    await expect(mcpAuditCommand({ drives }, io, { since: 'yesterday' }, now)).rejects.toThrow(/--since/);
  });

  it('prints through the scrubbing io: a secret in a stored row never reaches the output', async () => {
    await drives.record(drive(1, { detail: `exit 1: ${SECRET}`, targetName: `loop-${SECRET}` }));
    const { io, out } = capture();
    const scrubbing = scrubbingIo(io);
    scrubbing.useScrubber?.((t) => t.split(SECRET).join('[redacted]'));
    await mcpAuditCommand({ drives }, scrubbing, {});
    await mcpAuditCommand({ drives }, scrubbing, { json: true });
    expect(out()).not.toContain(SECRET);
    expect(out()).toContain('[redacted]');
  });

  it('a hostile terminal name or detail cannot drive the terminal', async () => {
    await drives.record(
      drive(1, { targetName: 'loop-\u001b]0;pwned\u0007x\u001b[2J', detail: 'a\rb\u009bc' }),
    );
    const { io, out } = capture();
    await mcpAuditCommand({ drives }, showingIo(io), {});
    await mcpAuditCommand({ drives }, io, { json: true });
    expect(out()).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/);
  });
});

describe('addMcpReportCommands', () => {
  it('registers grants and audit under mcp, opened through withBase', async () => {
    const { io, out } = capture();
    const base: McpReportBase = { loaded: { config: { connector } }, drives };
    let code = -1;
    const program = new Command('the-loop').exitOverride();
    const mcp = program.command('mcp');
    addMcpReportCommands(mcp, {
      io,
      withBase: async (_cmd: unknown, fn: (b: never) => Promise<number>) => {
        code = await fn(base as never);
      },
    });
    await drives.record(drive(1));
    await program.parseAsync(['mcp', 'grants', '--json'], { from: 'user' });
    expect(code).toBe(0);
    expect(JSON.parse(out()).map((r: { operator: string }) => r.operator)).toEqual(['ops', 'watcher']);
    const audit = capture();
    const again = new Command('the-loop').exitOverride();
    addMcpReportCommands(again.command('mcp'), {
      io: audit.io,
      withBase: async (_cmd: unknown, fn: (b: never) => Promise<number>) => {
        code = await fn(base as never);
      },
    });
    await again.parseAsync(['mcp', 'audit', '--operator', 'ops', '-n', '5'], { from: 'user' });
    expect(audit.out()).toMatch(/^1 call · 0 refused/);
    await expect(again.parseAsync(['mcp', 'audit', '--limit', '0'], { from: 'user' })).rejects.toThrow(
      /--limit/,
    );
  });
});
