import { stripControls } from '../../core/text.js';
import type { Terminal } from '../backend.js';
import { ConnectorError } from '../names.js';
import { visibleName } from '../resolve.js';
import { type TmuxExec, token } from './tmux-exec.js';

/**
 * Listing: every pane of every session on the server, as `Terminal`s. Names and titles are set by
 * whoever made the session or runs in the pane, so the output is split on markers carrying a random
 * token chosen for this call — a name or title holding tabs, newlines or anything else cannot shift
 * the fields. The pane's environment is never asked for.
 */

/** Order matters only for parsing: numbers first, then the text fields. */
const FIELDS = [
  'pane_id',
  'session_id',
  'session_created',
  'window_index',
  'pane_index',
  'pane_width',
  'pane_height',
  'pane_active',
  'window_active',
  'pane_dead',
  'pane_in_mode',
  'alternate_on',
  'session_name',
  'pane_title',
  'pane_current_command',
] as const;

type Row = Record<(typeof FIELDS)[number], string>;

const NUMERIC = /^\d{1,12}$/;

/** Why tmux cannot be used: not installed, or no server on the socket. */
export async function tmuxAvailable(exec: TmuxExec): Promise<{ ok: true } | { ok: false; reason: string }> {
  const r = await exec.run(['list-sessions', '-F', '#{session_id}']);
  if (r.ok) return { ok: true };
  const where = exec.socket ? `socket ${exec.socket} (tmux -L ${exec.socket})` : 'the default socket';
  if (r.missing) return { ok: false, reason: `tmux is not installed (${exec.binary} not found on PATH)` };
  if (/no server running|error connecting|no sessions/i.test(r.stderr)) {
    return { ok: false, reason: `no tmux server is running on ${where}` };
  }
  return { ok: false, reason: `tmux failed on ${where}: ${stripControls(r.stderr.trim()).slice(0, 300)}` };
}

function toTerminal(row: Row): Terminal | null {
  const numbers = FIELDS.slice(2, 12).map((f) => row[f]);
  if (!/^%\d{1,9}$/.test(row.pane_id) || !/^\$\d{1,9}$/.test(row.session_id)) return null;
  // alternate_on may be empty on a dead pane; every other number must be one.
  if (numbers.some((n, i) => !(NUMERIC.test(n) || (i === 9 && n === '')))) return null;
  const created = Number(row.session_created);
  // tmux 3.3a already writes a session name's control characters as `\033`; invisible marks it
  // keeps (bidi, zero-width) are spelled out: a grant matches what is shown.
  const name = visibleName(row.session_name);
  return {
    id: row.pane_id,
    backend: 'tmux',
    name,
    identity: `${row.session_id}@${row.session_created}`,
    label: `${name}:${row.window_index}.${row.pane_index}`,
    title: stripControls(row.pane_title),
    command: stripControls(row.pane_current_command),
    cols: Number(row.pane_width),
    rows: Number(row.pane_height),
    active: row.pane_active === '1' && row.window_active === '1',
    dead: row.pane_dead === '1',
    inMode: row.pane_in_mode !== '0',
    alternateScreen: row.alternate_on === '1',
    createdAt: created > 0 ? new Date(created * 1000).toISOString() : null,
  };
}

/** Split `list-panes` output made with the markers of `format(mark)` into rows; malformed ones are dropped. */
function parseRows(stdout: string, mark: string): Row[] {
  const rows: Row[] = [];
  for (const record of stdout.split(`${mark}R`).slice(1)) {
    const end = record.lastIndexOf(`${mark}E`);
    if (end < 0) continue;
    const values = record.slice(0, end).split(`${mark}F`);
    if (values.length !== FIELDS.length) continue;
    rows.push(Object.fromEntries(FIELDS.map((f, i) => [f, values[i] ?? ''])) as Row);
  }
  return rows;
}

export async function listTerminals(exec: TmuxExec): Promise<Terminal[]> {
  const mark = `<the-loop-${token()}>`;
  const format = `${mark}R${FIELDS.map((f) => `#{${f}}`).join(`${mark}F`)}${mark}E`;
  const r = await exec.run(['list-panes', '-a', '-F', format]);
  if (!r.ok) {
    if (r.missing) throw new ConnectorError('E_BACKEND_UNAVAILABLE', 'tmux is not installed');
    if (/no server running|error connecting/i.test(r.stderr)) return [];
    throw new Error(`tmux list-panes failed: ${r.stderr.trim() || `exit ${r.code}`}`);
  }
  return parseRows(r.stdout, mark)
    .map(toTerminal)
    .filter((t): t is Terminal => t !== null);
}
