import { sanitizeUntrusted } from '../core/text.js';
import type { Terminal } from './backend.js';
import { type Connection, listGranted } from './connection.js';
import { terminalInGrant } from './grant-rules.js';
import { parseKeys } from './keys.js';
import { type BackendName, ConnectorError, type ToolName } from './names.js';
import { MAX_COMMAND, MAX_TEXT } from './tool-defs.js';

/** A command of MAX_COMMAND characters of up to four bytes each. */
const MAX_COMMAND_BYTES = MAX_COMMAND * 4;

/**
 * What each tool does once the gate let it through (call.ts): given the resolved terminal, never the
 * agent's string. Each returns the structured result and a one-line detail for the audit.
 */

export interface Handled {
  structured: Record<string, unknown>;
  detail: string | null;
}

type Handler = (
  connection: Connection,
  terminal: Terminal | null,
  args: Record<string, unknown>,
  /** The client's cancellation of this call (MCP `notifications/cancelled`, a closed session). */
  signal?: AbortSignal,
) => Promise<Handled>;

/**
 * Text that is typed somewhere is refused when too long, never cut: a cut one would end in a note of
 * ours and a newline, and a newline typed at a prompt runs the line.
 */
function typedText(raw: string, limit: number, what: string): string {
  const bytes = Buffer.byteLength(raw, 'utf8');
  if (bytes > limit)
    throw new ConnectorError('E_INVALID', `${what} is ${bytes} bytes; at most ${limit}: send it in parts`);
  return sanitizeUntrusted(raw, limit);
}

const ref = (t: Terminal) => ({ id: t.id, name: t.name });

function needTerminal(terminal: Terminal | null): Terminal {
  if (!terminal) throw new ConnectorError('E_INVALID', 'this tool needs a target');
  return terminal;
}

function backendOf(connection: Connection, terminal: Terminal) {
  const backend = connection.backends.get(terminal.backend);
  if (!backend) throw new ConnectorError('E_BACKEND_UNAVAILABLE', `no ${terminal.backend} backend`);
  return backend;
}

async function listTerminals(
  connection: Connection,
  _t: Terminal | null,
  args: Record<string, unknown>,
): Promise<Handled> {
  const only = args.backend as BackendName | undefined;
  if (only && !connection.grant.backends.includes(only))
    throw new ConnectorError('E_SCOPE', `the grant does not include the ${only} backend`);
  const listed = await listGranted(connection, only);
  const terminals: Record<string, unknown>[] = [];
  for (const t of listed.terminals) {
    if (!terminalInGrant(connection.grant, connection.binding, t)) continue;
    const agent = await connection.accounting.agentSession(t.name);
    // Field by field: whatever else a backend knows about a terminal is not returned.
    terminals.push({
      id: t.id,
      backend: t.backend,
      name: t.name,
      label: t.label,
      title: t.title,
      command: t.command,
      cols: t.cols,
      rows: t.rows,
      active: t.active,
      dead: t.dead,
      inMode: t.inMode,
      alternateScreen: t.alternateScreen,
      createdAt: t.createdAt,
      agentSession: agent?.workItem ?? null,
    });
  }
  const unavailable = listed.unavailable;
  return { structured: { terminals, unavailable }, detail: `${terminals.length} terminal(s)` };
}

async function readTerminal(
  connection: Connection,
  t: Terminal | null,
  args: Record<string, unknown>,
): Promise<Handled> {
  const terminal = needTerminal(t);
  const read = await backendOf(connection, terminal).read(terminal, {
    lines: Number(args.lines ?? 100),
    history: args.history === true,
  });
  return {
    structured: {
      terminal: ref(terminal),
      lines: read.lines,
      truncated: read.truncated,
      cursor: read.cursor,
    },
    detail: `${read.lines.length} line(s)`,
  };
}

async function sendInput(
  connection: Connection,
  t: Terminal | null,
  args: Record<string, unknown>,
): Promise<Handled> {
  const terminal = needTerminal(t);
  // Keys are parsed before anything is sent: one unknown key refuses the whole call.
  const keys = parseKeys((args.keys as string[] | undefined) ?? []);
  const raw = typeof args.text === 'string' ? args.text : '';
  const text = typedText(raw, MAX_TEXT, 'the text');
  if (text === '' && keys.length === 0)
    throw new ConnectorError(
      'E_INVALID',
      raw === ''
        ? 'nothing to send: give text, keys or both'
        : 'the text was only control characters: nothing to send',
    );
  const backend = backendOf(connection, terminal);
  if (text !== '') await backend.sendText(terminal, text);
  if (keys.length > 0) await backend.sendKeys(terminal, keys);
  const textBytes = Buffer.byteLength(text);
  return {
    structured: { terminal: ref(terminal), textBytes, keys: keys.length },
    detail: `${textBytes} byte(s), ${keys.length} key(s)`,
  };
}

async function runCommand(
  connection: Connection,
  t: Terminal | null,
  args: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<Handled> {
  const terminal = needTerminal(t);
  const limits = connection.grant.run;
  const timeoutSeconds = (args.timeoutSeconds as number | undefined) ?? Math.min(30, limits.timeoutSeconds);
  const maxLines = (args.maxLines as number | undefined) ?? Math.min(200, limits.maxOutputLines);
  const where = args.where === 'pane' ? 'pane' : 'new-pane';
  // A request beyond the grant is refused, never clipped to it.
  if (timeoutSeconds > limits.timeoutSeconds)
    throw new ConnectorError(
      'E_SCOPE',
      `timeoutSeconds ${timeoutSeconds} is over the grant's ${limits.timeoutSeconds}`,
    );
  if (maxLines > limits.maxOutputLines)
    throw new ConnectorError('E_SCOPE', `maxLines ${maxLines} is over the grant's ${limits.maxOutputLines}`);
  if (where === 'pane' && !limits.inPane)
    throw new ConnectorError(
      'E_SCOPE',
      'the grant does not allow running in an existing pane (run.inPane): use where: new-pane',
    );
  const command = typedText(String(args.command), MAX_COMMAND_BYTES, 'the command');
  if (command.trim() === '')
    throw new ConnectorError('E_INVALID', 'the command is empty once control characters are removed');
  const result = await backendOf(connection, terminal).run(
    terminal,
    { command, where, timeoutMs: timeoutSeconds * 1000, maxLines, keep: args.keep === true },
    signal,
  );
  if (result.timedOut && signal?.aborted)
    throw new ConnectorError(
      'E_TIMEOUT',
      `the client cancelled the call: the command was stopped${result.kept ? ' (its pane is kept)' : ''}`,
      `output so far:\n${result.output}`,
    );
  if (result.timedOut)
    throw new ConnectorError(
      'E_TIMEOUT',
      `the command did not end within ${timeoutSeconds} s and was stopped${result.kept ? ' (its pane is kept)' : ''}`,
      `output so far:\n${result.output}`,
    );
  const ended = result.signal !== null ? `signal ${result.signal}` : `exit ${result.exitStatus}`;
  return {
    structured: {
      terminal: ref(terminal),
      exitStatus: result.exitStatus,
      signal: result.signal,
      output: result.output,
      truncated: result.truncated,
      ranIn: result.ranIn,
      kept: result.kept,
      durationMs: result.durationMs,
    },
    detail: `${ended} in ${result.ranIn} after ${result.durationMs} ms`,
  };
}

async function closeTerminal(connection: Connection, t: Terminal | null): Promise<Handled> {
  const terminal = needTerminal(t);
  await backendOf(connection, terminal).close(terminal);
  return { structured: { closed: ref(terminal) }, detail: `closed ${terminal.id}` };
}

export const HANDLERS: Readonly<Record<ToolName, Handler>> = {
  list_terminals: listTerminals,
  read_terminal: readTerminal,
  send_input: sendInput,
  run_command: runCommand,
  close_terminal: closeTerminal,
};
