import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, type Harness, marker as markIn, recorded, recorder, startHarness } from './harness.js';

// Real tmux on a private server, real node-pty clients, real WebSockets on loopback.
let h: Harness;
const dir = mkdtempSync(join(tmpdir(), 'the-loop-console-terminal-'));
beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.close();
  // Nothing left behind: no tmux client of ours remains (the server itself is gone too).
  expect((await h.tmux.run(['list-clients'])).stdout.trim()).toBe('');
  rmSync(dir, { recursive: true, force: true });
});

const ESC = '\x1b';

const marker = (target: string, file: string, text: string) => markIn(h.tmux, target, file, text);

async function windowSize(target: string): Promise<string> {
  return (
    await h.tmux.must(
      ['display-message', '-p', '-t', `=${target}:`, '#{window_width}x#{window_height}'],
      'display',
    )
  ).trim();
}

describe('terminal hub: viewers', () => {
  it('shows the pane and its scrollback, hello first', async () => {
    const { sessionId } = await h.newSession([
      'sh',
      '-c',
      'i=1; while [ $i -le 60 ]; do echo "hist-$i"; i=$((i+1)); done; echo SCREEN-READY; exec sleep 600',
    ]);
    await eventually(
      async () =>
        (await h.tmux.run(['capture-pane', '-p', '-t', `=loop-test-${sessionId}:`])).stdout.includes(
          'SCREEN-READY',
        ) || undefined,
    );
    const client = h.connect(sessionId, 'alice');
    await client.until(() => client.text.includes('SCREEN-READY'), 20_000, 'the screen');
    expect(client.messages[0]).toMatchObject({
      t: 'hello',
      role: 'viewer',
      cols: 80,
      rows: 21,
      takeover: null,
    });
    // hist-1 scrolled off the 20-line window long ago: only the replayed scrollback has it.
    expect(client.text).toContain('hist-1\x1b[0m\r\n');
    expect(client.text.indexOf('hist-1\x1b')).toBeLessThan(client.text.indexOf('SCREEN-READY'));
    client.close();
    await client.closed;
  });

  it("a viewer's keys, reports and resizes change nothing in the pane or the window", async () => {
    const file = join(dir, 'viewer.hex');
    const { sessionId, target } = await h.newSession(recorder(file));
    const client = h.connect(sessionId, 'alice');
    await client.until(() => client.text.includes('RECORDER-READY'), 20_000, 'the recorder');
    client.type('rm -rf /\r');
    client.type(`${ESC}[12;40R${ESC}[I`);
    client.resize(120, 40);
    await client.roundTrip();
    // The writer's path would have typed them before this marker: the pane saw the marker alone.
    await marker(target, file, 'MARK');
    expect(recorded(file)).toBe('MARK');
    expect(await windowSize(target)).toBe('80x20');
    expect(
      (await h.tmux.must(['capture-pane', '-p', '-t', `=${target}:`], 'capture')).includes('rm -rf'),
    ).toBe(false);
    client.close();
    await client.closed;
  });
});

describe('terminal hub: take over', () => {
  it("makes the principal's socket a writer: keys reach the pane (reports dropped), resize sizes the window; hand back ends it", async () => {
    const file = join(dir, 'writer.hex');
    const { sessionId, target } = await h.newSession(recorder(file));
    const writer = h.connect(sessionId, 'alice');
    const other = h.connect(sessionId, 'bob');
    await writer.until(() => writer.text.includes('RECORDER-READY'), 20_000, 'the recorder');
    await other.until(() => other.message('hello') !== undefined);

    h.setTakeover(sessionId, 'alice');
    await writer.until(() => writer.messages.some((m) => m.t === 'role' && m.role === 'writer'));
    await other.until(() =>
      other.messages.some((m) => m.t === 'role' && m.role === 'viewer' && m.takeover !== null),
    );
    // bob views: his keys go nowhere.
    other.type('bob');
    await other.roundTrip();
    writer.type(`hi${ESC}[12;40R${ESC}[?1;2c${ESC}]11;rgb:0000/0000/0000${ESC}\\ é${ESC}[A${ESC}[<0;3;4M\r`);
    // A report split across two frames is dropped whole.
    writer.type(`x${ESC}[>0;2`);
    writer.type('76;0cy');
    await eventually(() => recorded(file).endsWith('xy') || undefined);
    expect(recorded(file)).toBe(Buffer.from(`hi é${ESC}[A\rxy`, 'utf8').toString('latin1'));

    writer.resize(100, 31);
    await writer.until(() => writer.messages.some((m) => m.t === 'size'));
    expect(writer.messages.find((m) => m.t === 'size')).toEqual({ t: 'size', cols: 100, rows: 31 });
    await other.until(() => other.messages.some((m) => m.t === 'size'));
    expect(await windowSize(target)).toBe('100x30');

    h.setTakeover(sessionId, null);
    await writer.until(() =>
      writer.messages.some((m) => m.t === 'role' && m.role === 'viewer' && m.takeover === null),
    );
    writer.type('after');
    writer.resize(60, 15);
    await writer.roundTrip();
    await marker(target, file, 'MARK');
    expect(recorded(file).endsWith('xyMARK')).toBe(true);
    expect(await windowSize(target)).toBe('100x30');
    writer.close();
    other.close();
    await Promise.all([writer.closed, other.closed]);
  });
});

describe('terminal hub: endings and hostile output', () => {
  it('a session killed while viewed: closed, then 4410', async () => {
    const { sessionId, target } = await h.newSession(['sleep', '600']);
    const client = h.connect(sessionId, 'alice');
    await client.until(() => client.message('hello') !== undefined);
    await h.tmux.killSession(target);
    const closed = await client.closed;
    expect(closed.code).toBe(4410);
    expect(client.message('closed')).toMatchObject({ t: 'closed' });
    await eventually(() => (h.hub.counts().viewers === 0 ? true : undefined));
  });

  it('closeSession tells every viewer why and closes them with 4410', async () => {
    const { sessionId } = await h.newSession(['sleep', '600']);
    const a = h.connect(sessionId, 'alice');
    const b = h.connect(sessionId, 'bob');
    await a.until(() => a.message('hello') !== undefined);
    await b.until(() => b.message('hello') !== undefined);
    h.hub.closeSession(sessionId, 'the session was closed');
    expect((await a.closed).code).toBe(4410);
    expect((await b.closed).code).toBe(4410);
    expect(a.message('closed')).toEqual({ t: 'closed', reason: 'the session was closed' });
  });

  it('a session that is not there: 4404', async () => {
    const { sessionId, target } = await h.newSession(['sleep', '600']);
    await h.tmux.killSession(target);
    const client = h.connect(sessionId, 'alice');
    expect((await client.closed).code).toBe(4404);
  });

  it('hostile output (OSC 52 clipboard, titles, links) reaches the browser as bytes, for it to swallow', async () => {
    // tmux 3.3a is a first filter: with its default `set-clipboard external` it keeps a pane's OSC 52
    // from its clients, titles go to its status line only, and OSC 8 is not drawn for xterm-256color.
    // With `set-clipboard on` it forwards OSC 52: the hub passes it on untouched (the browser swallows it).
    await h.tmux.must(['set-option', '-s', 'set-clipboard', 'on'], 'set-option');
    const { sessionId, target } = await h.newSession([
      'sh',
      '-c',
      "echo WAITING; read x; printf '\\033]52;c;ZWNobyBwd25lZA==\\007\\033]0;evil title\\007\\033]2;evil2\\007\\033]8;;https://evil.example/\\033\\\\link\\033]8;;\\033\\\\ HOSTILE-DONE\\n'; exec sleep 600",
    ]);
    const client = h.connect(sessionId, 'alice');
    await client.until(() => client.text.includes('WAITING'), 20_000, 'the pane');
    await h.tmux.must(['send-keys', '-t', `=${target}:`, 'Enter'], 'send-keys');
    await client.until(() => client.text.includes('HOSTILE-DONE'), 20_000, 'the output');
    // tmux re-emits it with an empty selection: `OSC 52 ; ; <base64>`.
    expect(client.text).toContain(`${ESC}]52;;ZWNobyBwd25lZA==`);
    expect(client.text).toContain('link HOSTILE-DONE');
    await h.tmux.must(['set-option', '-s', 'set-clipboard', 'external'], 'set-option');
    client.close();
    await client.closed;
  });
});
