import { describe, expect, it } from 'vitest';
import { SEND_KEYS_CHUNK, sendKeysCommands } from '../../../src/console/terminal/control-client.js';
import {
  applyAck,
  FLOW_HIGH,
  FLOW_LOW,
  type FlowState,
  flowAction,
  parseClientFrame,
  statusLines,
  windowForTerminal,
} from '../../../src/console/terminal/flow-rules.js';
import { viewerArgs, viewerEnv } from '../../../src/console/terminal/pty-viewer.js';
import { Tmux } from '../../../src/runners/tmux/tmux.js';

const limits = { high: FLOW_HIGH, low: FLOW_LOW };
const flow = (sent: number, acked: number, paused: boolean, buffered = 0): FlowState => ({
  sent,
  acked,
  buffered,
  paused,
});

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
    expect(flowAction(state, limits)).toBe(action);
  });

  it('an ack moves forward only, and never past what was sent', () => {
    const state = flow(1000, 200, false);
    expect(applyAck(state, 500)).toEqual({ state: { ...state, acked: 500 }, bad: false });
    expect(applyAck(state, 100)).toEqual({ state, bad: false });
    for (const lie of [1001, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 60]) {
      expect(applyAck(state, lie)).toEqual({ state, bad: true });
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
