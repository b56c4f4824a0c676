import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Terminal } from '../../../src/connector/backend.js';
import { parseKeys } from '../../../src/connector/keys.js';
import { KittyBackend } from '../../../src/connector/kitty/kitty-backend.js';
import { sanitizeUntrusted } from '../../../src/core/text.js';
import { pidAlive } from '../../helpers/cli.js';
import { kittySkipReason, startKitty, type TestKitty } from '../../helpers/kitty.js';

/**
 * The kitty backend against a real kitty 0.26 under Xvfb, on a private socket. The kitty (and so
 * every window's program) carries a canary in its environment, which no result may contain.
 */

const skip = kittySkipReason();
const CANARY = `kitty-canary-${Math.random().toString(36).slice(2)}${Date.now().toString(36)}`;

let kitty: TestKitty;
let backend: KittyBackend;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** A new window running `argv` (test-controlled), found by its id in the backend's list. */
async function openWindow(title: string, argv: string[], cwd = kitty.dir): Promise<Terminal> {
  const out = await kitty.remote([
    'launch',
    '--type=window',
    '--keep-focus',
    '--title',
    title,
    '--cwd',
    cwd,
    ...argv,
  ]);
  const id = `kitty:${out.trim()}`;
  return until(`window ${id}`, async () => (await backend.list()).find((t) => t.id === id));
}

async function screen(terminal: Terminal): Promise<string> {
  return (await backend.read(terminal, { lines: 200, history: true })).lines.join('\n');
}

describe.skipIf(skip !== null)(`kitty backend (real kitty under Xvfb)${skip ? `: ${skip}` : ''}`, () => {
  beforeAll(async () => {
    kitty = await startKitty(['bash', '--norc', '--noprofile'], { THE_LOOP_KITTY_CANARY: CANARY });
    backend = new KittyBackend({ to: kitty.to });
  });

  afterAll(async () => {
    await backend?.dispose();
    await kitty?.stop();
  });

  it('is available, and lists windows by id with no environment', async () => {
    expect(await backend.available()).toEqual({ ok: true });
    const list = await backend.list();
    expect(list).toHaveLength(1);
    const [first] = list;
    expect(first).toMatchObject({ id: 'kitty:1', backend: 'kitty', command: 'bash', dead: false });
    expect(first?.identity).toMatch(/^\d+\/1$/);
    expect(first?.cols).toBeGreaterThan(10);
    expect(first?.rows).toBeGreaterThan(5);
    // The raw listing has it (kitty lists each window's environment); ours does not.
    expect(await kitty.remote(['ls'])).toContain(CANARY);
    expect(JSON.stringify(list)).not.toContain(CANARY);
  });

  it('reads, and sends text that a shell receives as typed', async () => {
    const [shell] = await backend.list();
    if (!shell) throw new Error('no window');
    await backend.sendText(shell, 'echo "hello-$((6*7))"');
    await backend.sendKeys(shell, parseKeys(['Enter']));
    await until('the echo', async () => ((await screen(shell)).includes('hello-42') ? true : undefined));
    const read = await backend.read(shell, { lines: 3, history: false });
    expect(read.lines.length).toBeLessThanOrEqual(3);
    expect(read.cursor).not.toBeNull();
    expect(JSON.stringify(read)).not.toContain(CANARY);
  });

  it('delivers an injection corpus byte for byte to cat, and nothing runs', async () => {
    const work = join(kitty.dir, 'corpus');
    mkdirSync(work, { mode: 0o700 });
    const received = join(work, 'received');
    const cat = await openWindow('corpus-cat', ['sh', '-c', 'cat > "$1"', 'sh', received], work);
    const corpus = [
      `it's`,
      `say "hi"`,
      '$(touch C)',
      '`touch C`',
      'true; touch C',
      'a\nb\n$(touch C)',
      'x\u001b[201~; touch C',
      '\u001b[200~touch C\u001b[201~',
      '＄（touch C）ｔouch Ｃ',
      '@selection',
      '#{pane_id} #(touch C)',
      // One long line (a terminal's line discipline holds at most 4095 bytes of an unfinished line).
      Array.from({ length: 50 }, (_, i) => `word${i}${'x'.repeat(60)}`).join(' '),
    ];
    // A newline is refused (kitty cannot paste bracketed: it would press Enter in a shell).
    await expect(backend.sendText(cat, 'a\nb\n$(touch C)')).rejects.toMatchObject({ code: 'E_INVALID' });
    // The server strips escapes before a backend sees text (the backend never adds any back); the
    // lines go one by one, each ended by the Enter key (the terminal's CR, a newline for cat).
    const sent = corpus.map((text) => sanitizeUntrusted(text)).flatMap((text) => text.split('\n'));
    for (const text of sent) {
      if (text !== '') await backend.sendText(cat, text);
      await backend.sendKeys(cat, parseKeys(['Enter']));
    }
    await backend.sendKeys(cat, parseKeys(['C-d']));
    const expected = sent.map((t) => `${t}\n`).join('');
    await until('cat to finish', async () =>
      existsSync(received) && readFileSync(received, 'utf8') === expected ? true : undefined,
    );
    expect(existsSync(join(work, 'C'))).toBe(false);
    expect(existsSync(join(kitty.dir, 'C'))).toBe(false);
  });

  it('sends keys as their terminal bytes', async () => {
    const out = join(kitty.dir, 'keys');
    const raw = await openWindow('keys', ['sh', '-c', 'stty raw -echo; head -c 15 > "$1"', 'sh', out]);
    await sleep(300); // stty must have run before the bytes arrive
    await backend.sendKeys(raw, parseKeys(['a', 'S-a', 'C-a', 'M-b', 'Up', 'F5', 'Enter', 'Tab']));
    const want = 'aA\u0001\u001bb\u001b[A\u001b[15~\r\t';
    await until('the key bytes', async () =>
      existsSync(out) && readFileSync(out, 'latin1') === want ? true : undefined,
    );
  });

  it('runs a command in a new window with its real exit status and output', async () => {
    const [shell] = await backend.list();
    if (!shell) throw new Error('no window');
    const request = { where: 'new-pane' as const, timeoutMs: 15_000, maxLines: 100, keep: false };
    const three = await backend.run(shell, { ...request, command: 'exit 3' });
    expect(three).toMatchObject({ exitStatus: 3, timedOut: false, kept: false, output: '' });
    const ab = await backend.run(shell, { ...request, command: "printf 'a\\nb'" });
    expect(ab).toMatchObject({ exitStatus: 0, output: 'a\nb', truncated: false });
    // kitty's launch replaces an argument `@selection` with live text: the command is no argument.
    const at = await backend.run(shell, { ...request, command: '@selection' });
    expect(at.exitStatus).toBe(127);
    const quoted = await backend.run(shell, {
      ...request,
      command: `echo "it's" '$(x)'; exit 4`,
      maxLines: 1,
    });
    expect(quoted).toMatchObject({ exitStatus: 4, output: `it's $(x)` });
    const many = await backend.run(shell, { ...request, command: 'seq 1 50', maxLines: 5 });
    expect(many).toMatchObject({ exitStatus: 0, output: '46\n47\n48\n49\n50', truncated: true });
    const ids = (await backend.list()).map((t) => t.id);
    for (const r of [three, ab, at, quoted, many]) expect(ids).not.toContain(r.ranIn);
    await expect(backend.run(shell, { ...request, where: 'pane', command: 'true' })).rejects.toMatchObject({
      code: 'E_PANE_BUSY',
    });
  });

  it('stops a command that does not end, and its window goes', async () => {
    const [shell] = await backend.list();
    if (!shell) throw new Error('no window');
    const pidFile = join(kitty.dir, 'forever.pid');
    const started = Date.now();
    const r = await backend.run(shell, {
      where: 'new-pane',
      command: `echo started; sh -c 'echo $$ > "$1"; exec sleep 1000' sh '${pidFile}'`,
      timeoutMs: 1500,
      maxLines: 10,
      keep: false,
    });
    expect(r).toMatchObject({ exitStatus: null, timedOut: true, kept: false, output: 'started' });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect((await backend.list()).map((t) => t.id)).not.toContain(r.ranIn);
    // Closing the window hung up its terminal: the command itself is gone too.
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    await until('the command to end', async () => (pidAlive(pid) ? undefined : true));
  });

  it('refuses a window that went away between listing and use (E_TARGET_GONE)', async () => {
    const gone = await openWindow('short-lived', ['sleep', '1000']);
    await kitty.remote(['close-window', '--match', `id:${gone.id.slice('kitty:'.length)}`]);
    await until('the window to go', async () =>
      (await backend.list()).some((t) => t.id === gone.id) ? undefined : true,
    );
    const code = { code: 'E_TARGET_GONE' };
    await expect(backend.read(gone, { lines: 5, history: false })).rejects.toMatchObject(code);
    await expect(backend.sendText(gone, 'echo x')).rejects.toMatchObject(code);
    await expect(backend.sendKeys(gone, parseKeys(['Enter']))).rejects.toMatchObject(code);
    const request = {
      where: 'new-pane' as const,
      command: 'true',
      timeoutMs: 5000,
      maxLines: 5,
      keep: false,
    };
    await expect(backend.run(gone, request)).rejects.toMatchObject(code);
    await expect(backend.close(gone)).rejects.toMatchObject(code);
    // The same window id claimed by another kitty process (identity) is not this window either.
    const [shell] = await backend.list();
    if (!shell) throw new Error('no window');
    await expect(
      backend.sendText({ ...shell, identity: `1/${shell.id.slice(6)}` }, 'x'),
    ).rejects.toMatchObject(code);
  });

  it('closes a window', async () => {
    const doomed = await openWindow('doomed', ['sleep', '1000']);
    await backend.close(doomed);
    await until('the window to close', async () =>
      (await backend.list()).some((t) => t.id === doomed.id) ? undefined : true,
    );
  });

  it('is unavailable when kitty is not running at the address', async () => {
    const none = new KittyBackend({ to: `unix:${join(kitty.dir, 'no-such.sock')}` });
    const state = await none.available();
    expect(state.ok).toBe(false);
    expect(!state.ok && state.reason).toMatch(/not reachable/);
    await expect(none.list()).rejects.toMatchObject({ code: 'E_BACKEND_UNAVAILABLE' });
  });
});
