import { describe, expect, it } from 'vitest';
import type { TurnEvent } from '../../src/core/events.js';
import { checklistOf, TODO_KEEP, TodoTracker, todosFrom } from '../../src/status/todos.js';

const use = (input: unknown, name = 'AnyTool', id = 't'): TurnEvent => ({
  type: 'tool-use',
  id,
  name,
  input,
});

describe('todosFrom', () => {
  it("reads Claude Code's TodoWrite shape", () => {
    const input = {
      todos: [
        { content: 'Read the test', status: 'completed', activeForm: 'Reading' },
        { content: 'Fix the race', status: 'in_progress', activeForm: 'Fixing' },
        { content: 'Run the suite', status: 'pending', activeForm: 'Running' },
      ],
    };
    expect(todosFrom([use(input, 'TodoWrite')])).toEqual([
      { text: 'Read the test', status: 'completed' },
      { text: 'Fix the race', status: 'in_progress' },
      { text: 'Run the suite', status: 'pending' },
    ]);
  });

  it("reads Gemini CLI's write_todos and Codex's update_plan shapes; unknown statuses are pending", () => {
    const gemini = {
      todos: [
        { description: 'Plan', status: 'cancelled' },
        { description: 'Do', status: 'done' },
      ],
    };
    expect(todosFrom([use(gemini, 'write_todos')])).toEqual([
      { text: 'Plan', status: 'pending' },
      { text: 'Do', status: 'completed' },
    ]);
    const codex = {
      explanation: 'x',
      plan: [
        { step: 'Look', status: 'in-progress' },
        { step: 'Leap', status: 42 },
      ],
    };
    expect(todosFrom([use(codex, 'update_plan')])).toEqual([
      { text: 'Look', status: 'in_progress' },
      { text: 'Leap', status: 'pending' },
    ]);
  });

  it('takes the last checklist-shaped call, whatever the tool or engine is called', () => {
    const first = use({ todos: [{ content: 'a', status: 'pending' }] }, 'TodoWrite');
    const second = use({ plan: [{ step: 'b', status: 'completed' }] }, 'some_other_name');
    const notAList = use({ command: 'ls', todos: 'not a list' }, 'Bash');
    const noItems = use({ todos: [{ title: 'no text field' }, 7, null] }, 'TodoWrite');
    const events: TurnEvent[] = [first, { type: 'text', text: 'hi' }, second, notAList, noItems];
    expect(todosFrom(events)).toEqual([{ text: 'b', status: 'completed' }]);
    // The same input under any name reads the same: the shape decides (invariant 8).
    expect(todosFrom([use(second.type === 'tool-use' ? second.input : null, 'TodoWrite')])).toEqual(
      todosFrom([second]),
    );
  });

  it('an empty list clears the checklist; no checklist at all is empty', () => {
    expect(todosFrom([use({ todos: [{ content: 'a', status: 'pending' }] }), use({ todos: [] })])).toEqual(
      [],
    );
    expect(todosFrom([{ type: 'text', text: 'x' }, use({ path: '/tmp' })])).toEqual([]);
    expect(todosFrom([])).toEqual([]);
  });

  it('reads an input given as JSON text, and ignores text that is not JSON', () => {
    const text = JSON.stringify({ plan: [{ step: 'from text', status: 'completed' }] });
    expect(todosFrom([use(text)])).toEqual([{ text: 'from text', status: 'completed' }]);
    expect(checklistOf('{ not json')).toBeUndefined();
    expect(checklistOf('plain words')).toBeUndefined();
    expect(checklistOf([{ content: 'an array is not a checklist' }])).toBeUndefined();
  });

  it(`keeps at most ${TODO_KEEP} items of a runaway list, and bounds each text`, () => {
    const todos = Array.from({ length: 10_000 }, (_, i) => ({ content: `item ${i}`, status: 'pending' }));
    const items = todosFrom([use({ todos })]);
    expect(items).toHaveLength(TODO_KEEP);
    expect(items[0]?.text).toBe('item 0');
    const long = todosFrom([use({ todos: [{ content: 'x'.repeat(1_000_000), status: 'pending' }] })]);
    expect(long[0]?.text.length).toBeLessThanOrEqual(2000);
  });
});

describe('TodoTracker', () => {
  it('says when the checklist changed, one event at a time', () => {
    const tracker = new TodoTracker();
    const list = { todos: [{ content: 'a', status: 'pending' }] };
    expect(tracker.push({ type: 'text', text: 'x' })).toBe(false);
    expect(tracker.push(use({ path: '/x' }))).toBe(false);
    expect(tracker.push(use(list))).toBe(true);
    expect(tracker.push(use(structuredClone(list)))).toBe(false);
    expect(tracker.push(use({ todos: [{ content: 'a', status: 'completed' }] }))).toBe(true);
    expect(tracker.items).toEqual([{ text: 'a', status: 'completed' }]);
    const copy = tracker.items;
    copy[0] = { text: 'changed', status: 'pending' };
    expect(tracker.items[0]?.text).toBe('a');
    expect(tracker.push(use({ todos: [] }))).toBe(true);
    expect(tracker.items).toEqual([]);
  });

  it('agrees with todosFrom over the same events', () => {
    const events: TurnEvent[] = [
      use({ todos: [{ content: 'a', status: 'pending' }] }),
      use({ command: 'ls' }),
      use({ plan: [{ step: 'b', status: 'in_progress' }] }),
      { type: 'tool-result', id: 't', ok: true, summary: '' },
    ];
    const tracker = new TodoTracker();
    for (const e of events) tracker.push(e);
    expect(tracker.items).toEqual(todosFrom(events));
  });
});
