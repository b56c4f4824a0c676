/**
 * The agent's checklist, read from its own tool calls: the last call whose input has a checklist's
 * shape wins (each such call states the whole list). The shape decides, never the engine's or the
 * tool's name (invariant 8): `{ todos: [{ content | description | text, status }] }` (Claude Code's
 * TodoWrite, Gemini CLI's write_todos) and `{ plan: [{ step, status }] }` (Codex's update_plan).
 * Pure; `TodoTracker` is the same rule fed one event at a time during a live turn.
 */
import type { TurnEvent } from '../core/events.js';
import type { TodoItem } from '../core/status-facts.js';

/** Items kept of one list: a runaway list is cut here, the renderer shows fewer still. */
export const TODO_KEEP = 200;
/** Characters kept of one item's text (the renderer shows fewer): bounds what a live turn holds. */
const TEXT_KEEP = 2000;

const TEXT_FIELDS = ['content', 'description', 'text', 'step'] as const;

function statusOf(value: unknown): TodoItem['status'] {
  const s = typeof value === 'string' ? value.toLowerCase().replace(/[\s-]+/g, '_') : '';
  if (s === 'completed' || s === 'complete' || s === 'done') return 'completed';
  if (s === 'in_progress' || s === 'active' || s === 'running') return 'in_progress';
  return 'pending';
}

function itemOf(value: unknown): TodoItem | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  const field = TEXT_FIELDS.find((f) => typeof record[f] === 'string');
  if (field === undefined) return undefined;
  return { text: (record[field] as string).slice(0, TEXT_KEEP), status: statusOf(record.status) };
}

/** Some engines hand a tool's input over as its JSON text. */
function objectOf(input: unknown): Record<string, unknown> | undefined {
  let value = input;
  if (typeof input === 'string' && input.trimStart().startsWith('{')) {
    try {
      value = JSON.parse(input);
    } catch {
      return undefined;
    }
  }
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : undefined;
}

/**
 * The checklist a tool's input states, or undefined when it has no checklist's shape. An empty list
 * is a checklist (the agent cleared it); a list none of whose entries is an item is not.
 */
export function checklistOf(input: unknown): TodoItem[] | undefined {
  const record = objectOf(input);
  if (record === undefined) return undefined;
  const list = Array.isArray(record.todos)
    ? record.todos
    : Array.isArray(record.plan)
      ? record.plan
      : undefined;
  if (list === undefined) return undefined;
  const items: TodoItem[] = [];
  for (const entry of list) {
    const item = itemOf(entry);
    if (item === undefined) continue;
    if (items.length < TODO_KEEP) items.push(item);
  }
  return items.length === 0 && list.length > 0 ? undefined : items;
}

/** The checklist stated by the last checklist-shaped tool call of a turn (empty when none). */
export function todosFrom(events: readonly TurnEvent[]): TodoItem[] {
  for (let i = events.length - 1; i >= 0; i--) {
    const event = events[i];
    if (event?.type !== 'tool-use') continue;
    const list = checklistOf(event.input);
    if (list !== undefined) return list;
  }
  return [];
}

const same = (a: readonly TodoItem[], b: readonly TodoItem[]): boolean =>
  a.length === b.length && a.every((x, i) => x.text === b[i]?.text && x.status === b[i]?.status);

/** The checklist of a live turn, one event at a time. */
export class TodoTracker {
  private current: TodoItem[] = [];

  /** Takes one event; true when the checklist changed. */
  push(event: TurnEvent): boolean {
    if (event.type !== 'tool-use') return false;
    const list = checklistOf(event.input);
    if (list === undefined || same(list, this.current)) return false;
    this.current = list;
    return true;
  }

  get items(): TodoItem[] {
    return this.current.map((t) => ({ ...t }));
  }
}
