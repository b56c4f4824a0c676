import { describe, expect, it } from 'vitest';
import { SEND_KEYS_CHUNK, sendKeysCommands } from '../../../src/console/terminal/control-client.js';
import {
  applyAck,
  FLOW_HIGH,
  FLOW_LOW,
  FLOW_PARK_MS,
  type FlowState,
  flowAction,
  INITIAL_FLOW,
  noteSent,
  parkDue,
  parseClientFrame,
  statusLines,
  stepFlow,
  windowForTerminal,
} from '../../../src/console/terminal/flow-rules.js';
import { viewerArgs, viewerEnv } from '../../../src/console/terminal/pty-viewer.js';
import { Tmux } from '../../../src/runners/tmux/tmux.js';

const limits = { high: FLOW_HIGH, low: FLOW_LOW, parkMs: FLOW_PARK_MS };
const flow = (sent: number, acked: number, paused: boolean, buffered = 0): FlowState => ({
  ...INITIAL_FLOW,
  sent,
  acked,
  buffered,
  paused,
});
/** A state at time 1000 ms: output waiting since `waiting`, paused since `pausedAt`, parked at `parked` acked. */
const timed = (
  base: FlowState,
  times: { waiting?: number; pausedAt?: number; parked?: number },
): FlowState => ({
  ...base,
  waitingSince: times.waiting ?? null,
  pausedAt: times.pausedAt ?? (base.paused ? 1000 : null),
  parkedAcked: times.parked ?? null,
});
const NOW = 1000;

describe('flow rules', () => {
  it.each([
    ['reading, little behind', flow(100_000, 0, false), 'none'],
    ['reading, at the high mark', flow(FLOW_HIGH, 0, false), 'none'],
    ['reading, past the high mark', flow(FLOW_HIGH + 1, 0, false), 'pause'],
    ['reading, acks keep it under', flow(10_000_000, 10_000_000 - 1000, false), 'none'],
    ['paused, still above the low mark', flow(FLOW_HIGH + 1, FLOW_HIGH - FLOW_LOW, true), 'none'],
    ['paused, acked below the low mark', flow(FLOW_HIGH + 1, FLOW_HIGH - FLOW_LOW + 2, true), 'resume'],
    [
      'acks without reading: the socket queue counts',
      flow(FLOW_HIGH * 4, FLOW_HIGH * 4, false, FLOW_HIGH + 1),
      'pause',
    ],
    ['paused with the socket queue still full', flow(FLOW_HIGH, FLOW_HIGH, true, FLOW_LOW + 1), 'none'],
  ] as const)('%s → %s', (_name, state, action) => {
    // Output waiting since just now: no park is due in any of these.
    expect(flowAction(timed(state, { waiting: NOW, pausedAt: NOW }), limits, NOW)).toBe(action);
  });

  const grace = FLOW_PARK_MS;
  it.each([
    ['unacknowledged, not yet the grace', timed(flow(1000, 0, false), { waiting: NOW - grace + 1 }), 'none'],
    ['unacknowledged for the grace: parked', timed(flow(1000, 0, false), { waiting: NOW - grace }), 'park'],
    ['all acknowledged long ago: nothing waits', timed(flow(1000, 1000, false), {}), 'none'],
    [
      'paused for the grace while acks still move: parked',
      timed(flow(FLOW_HIGH + 1, 1, true), { waiting: NOW - 1, pausedAt: NOW - grace }),
      'park',
    ],
    [
      'paused for the grace but acked below the low mark: resumed, not parked',
      timed(flow(FLOW_HIGH + 1, FLOW_HIGH, true), { waiting: NOW - grace, pausedAt: NOW - grace }),
      'resume',
    ],
    [
      'parked, nothing acknowledged since',
      timed(flow(FLOW_HIGH + 1, 10, true), { waiting: 0, pausedAt: 0, parked: 10 }),
      'none',
    ],
    [
      'parked, acked since but still above the low mark',
      timed(flow(FLOW_HIGH + 1, 20, true), { waiting: NOW, pausedAt: 0, parked: 10 }),
      'none',
    ],
    [
      'parked, acked below the low mark: a new client',
      timed(flow(FLOW_HIGH + 1, FLOW_HIGH, true), { waiting: NOW, pausedAt: 0, parked: 10 }),
      'unpark',
    ],
    [
      'parked while a little behind, never acknowledging: stays parked',
      timed(flow(5000, 0, true), { waiting: 0, pausedAt: 0, parked: 0 }),
      'none',
    ],
    [
      'parked while a little behind, then it acknowledges: a new client',
      timed(flow(5000, 5000, true), { pausedAt: 0, parked: 0 }),
      'unpark',
    ],
  ] as const)('park: %s → %s', (_name, state, action) => {
    expect(flowAction(state, limits, NOW)).toBe(action);
  });

  it('a park falls due at the older of the wait and the pause, plus the grace; never while parked', () => {
    expect(parkDue(flow(0, 0, false), limits)).toBeNull();
    expect(parkDue(timed(flow(10, 0, false), { waiting: 100 }), limits)).toBe(100 + grace);
    expect(parkDue(timed(flow(FLOW_HIGH + 1, 0, true), { waiting: 300, pausedAt: 200 }), limits)).toBe(
      200 + grace,
    );
    expect(parkDue(timed(flow(FLOW_HIGH + 1, 0, true), { waiting: 100, pausedAt: 200 }), limits)).toBe(
      100 + grace,
    );
    expect(parkDue(timed(flow(10, 0, true), { waiting: 100, parked: 0 }), limits)).toBeNull();
  });

  it('output waits from its first unacknowledged byte; an ack that moves restarts the wait', () => {
    const sent = noteSent(INITIAL_FLOW, 100, 10);
    expect(sent).toMatchObject({ sent: 100, waitingSince: 10 });
    expect(noteSent(sent, 50, 20)).toMatchObject({ sent: 150, waitingSince: 10 });
    expect(noteSent(sent, 0, 20)).toBe(sent);
    const more = noteSent(sent, 50, 20);
    expect(applyAck(more, 100, 30).state).toMatchObject({ acked: 100, waitingSince: 30 });
    expect(applyAck(more, 150, 30).state).toMatchObject({ acked: 150, waitingSince: null });
    // An old total moves nothing, not even the wait.
    expect(applyAck({ ...more, acked: 120 }, 100, 30).state).toMatchObject({ acked: 120, waitingSince: 10 });
  });

  it('steps: pause and resume, park (still counted paused) and unpark (a fresh wait)', () => {
    const behind = { ...flow(1000, 400, false), waitingSince: 5 };
    expect(stepFlow(behind, 'pause', 10)).toMatchObject({ paused: true, pausedAt: 10 });
    expect(stepFlow(stepFlow(behind, 'pause', 10), 'resume', 20)).toMatchObject({
      paused: false,
      pausedAt: null,
    });
    const parked = stepFlow(behind, 'park', 30);
    expect(parked).toMatchObject({ paused: true, pausedAt: 30, parkedAcked: 400 });
    expect(stepFlow({ ...parked, acked: 900 }, 'unpark', 40)).toMatchObject({
      paused: false,
      pausedAt: null,
      parkedAcked: null,
      waitingSince: 40,
    });
    expect(stepFlow({ ...parked, acked: 1000 }, 'unpark', 40)).toMatchObject({ waitingSince: null });
    expect(stepFlow(behind, 'none', 50)).toBe(behind);
  });

  it('an ack moves forward only, and never past what was sent', () => {
    const state = flow(1000, 200, false);
    expect(applyAck(state, 500, 1)).toEqual({ state: { ...state, acked: 500, waitingSince: 1 }, bad: false });
    expect(applyAck(state, 100, 1)).toEqual({ state, bad: false });
    for (const lie of [1001, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) {
      expect(applyAck(state, lie, 1)).toEqual({ state, bad: true });
    }
  });
});

describe('client frames', () => {
  it.each([
    ['{"t":"ack","bytes":12}', { ok: true, message: { t: 'ack', bytes: 12 } }],
    ['{"t":"input","data":"ls\\r"}', { ok: true, message: { t: 'input', data: 'ls\r' } }],
    ['{"t":"resize","cols":100,"rows":30}', { ok: true, message: { t: 'resize', cols: 100, rows: 30 } }],
    ['{"t":"input","data":"x","extra":1}', { ok: true, message: { t: 'input', data: 'x' } }],
    ['not json', { ok: false, why: 'not JSON' }],
    ['null', { ok: false, why: 'not an object' }],
    ['"ack"', { ok: false, why: 'not an object' }],
    ['{"t":"exec"}', { ok: false, why: 'unknown message type' }],
    ['{"t":"ack","bytes":"12"}', { ok: false, why: 'ack without bytes' }],
    ['{"t":"input","data":7}', { ok: false, why: 'input without data' }],
    ['{"t":"resize","cols":100}', { ok: false, why: 'resize without cols and rows' }],
    ['{"t":"__proto__"}', { ok: false, why: 'unknown message type' }],
  ])('%s', (frame, expected) => {
    expect(parseClientFrame(frame)).toEqual(expected);
  });
});

describe('sizes', () => {
  it.each([
    [100, 31, 1, { cols: 100, rows: 30 }],
    [100, 30, 0, { cols: 100, rows: 30 }],
    [1, 1, 1, { cols: 20, rows: 4 }],
    [100_000, 100_000, 1, { cols: 500, rows: 199 }],
    [80.7, 24.9, 1, { cols: 80, rows: 23 }],
    [80, 5, 5, { cols: 80, rows: 1 }],
  ])('a writer terminal %s×%s (status %s) → window %j', (cols, rows, status, expected) => {
    expect(windowForTerminal(cols, rows, status)).toEqual(expected);
  });

  it('refuses sizes that are no numbers', () => {
    expect(windowForTerminal(Number.NaN, 20, 1)).toBeNull();
    expect(windowForTerminal(80, Number.POSITIVE_INFINITY, 1)).toBeNull();
  });

  it.each([
    ['off', 0],
    ['on', 1],
    ['2', 2],
    ['5', 5],
    ['9', 1],
    ['', 1],
  ])('status %j is %i lines', (option, lines) => {
    expect(statusLines(option)).toBe(lines);
  });
});

describe('send-keys commands', () => {
  it('types bytes as hex, in bounded commands, to a pane id only', () => {
    expect(sendKeysCommands('%3', Buffer.from('a\x1b[A é', 'utf8'))).toEqual([
      'send-keys -H -t %3 61 1b 5b 41 20 c3 a9\n',
    ]);
    const long = sendKeysCommands('%0', Buffer.alloc(SEND_KEYS_CHUNK * 2 + 1, 0x3b));
    expect(long).toHaveLength(3);
    expect(long[2]).toBe('send-keys -H -t %0 3b\n');
    // Nothing typed ever reaches tmux's command parser as text: only hex pairs follow the pane.
    for (const line of long) expect(line).toMatch(/^send-keys -H -t %\d+( [0-9a-f]{2})+\n$/);
    expect(() => sendKeysCommands('=loop-x:', Buffer.from('a'))).toThrow(/pane id/);
    expect(() => sendKeysCommands('%1; kill-server', Buffer.from('a'))).toThrow(/pane id/);
  });
});

describe('the viewer client', () => {
  it('attaches read-only, ignoring its size, to the exact session, on our server', () => {
    const tmux = new Tmux({ socket: 'the-loop-x' });
    expect(viewerArgs(tmux, 'loop-abc')).toEqual([
      '-L',
      'the-loop-x',
      '-u',
      'attach-session',
      '-r',
      '-f',
      'ignore-size,read-only',
      '-t',
      '=loop-abc',
    ]);
    expect(() => viewerArgs(tmux, 'loop-abc; kill-server')).toThrow(/unsafe tmux target/);
  });

  it("gets none of the daemon's environment but what tmux needs", () => {
    expect(
      viewerEnv({
        PATH: '/bin',
        LANG: 'C.UTF-8',
        TMUX_TMPDIR: '/run/x',
        ANTHROPIC_API_KEY: 'sk-secret',
        HOME: '/h',
      }),
    ).toEqual({ TERM: 'xterm-256color', PATH: '/bin', LANG: 'C.UTF-8', TMUX_TMPDIR: '/run/x' });
  });
});
