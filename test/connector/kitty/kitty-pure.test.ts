import { describe, expect, it } from 'vitest';
import { parseKey } from '../../../src/connector/keys.js';
import { keyBytes } from '../../../src/connector/kitty/key-bytes.js';
import { KittyBackend } from '../../../src/connector/kitty/kitty-backend.js';
import { parseLs, windowIdOf } from '../../../src/connector/kitty/kitty-ls.js';
import { screenWithCursor } from '../../../src/connector/kitty/kitty-text.js';
import { ConnectorError } from '../../../src/connector/names.js';

const CANARY = 'kitty-canary-7f3e9a2b41c8d05e';

/** `kitty @ ls` as kitty 0.26.5 prints it (trimmed), with a secret in a window's environment. */
const LS = JSON.stringify([
  {
    id: 1,
    is_focused: true,
    platform_window_id: 2097164,
    tabs: [
      {
        id: 1,
        title: 'work',
        layout: 'fat',
        windows: [
          {
            id: 3,
            title: 'vim \u001b]0;evil\u0007notes',
            pid: 2330,
            cwd: '/tmp',
            cmdline: ['bash', '--posix'],
            columns: 80,
            lines: 24,
            is_focused: true,
            is_self: false,
            env: { KITTY_PID: '2270', SECRET: CANARY, PATH: '/usr/bin' },
            foreground_processes: [{ cmdline: ['/usr/bin/vim', 'notes.txt'], cwd: '/tmp', pid: 2400 }],
            user_vars: { x: CANARY },
            new_field_of_a_later_kitty: { nested: CANARY },
          },
        ],
      },
    ],
  },
]);

describe('kitty ls parsing', () => {
  it('lists windows by id and identity, with no environment and no unknown field', () => {
    const windows = parseLs(LS);
    expect(windows).toHaveLength(1);
    expect(windows[0]?.terminal).toEqual({
      id: 'kitty:3',
      backend: 'kitty',
      // What grants match: the title's control characters spelled out, never dropped.
      name: String.raw`vim \u{1b}]0;evil\u{7}notes`,
      identity: '2270/3',
      label: 'work / 3',
      title: 'vim notes',
      command: 'vim',
      cols: 80,
      rows: 24,
      active: true,
      dead: false,
      inMode: false,
      alternateScreen: false,
      createdAt: null,
    });
    expect(JSON.stringify(windows)).not.toContain(CANARY);
    expect(JSON.stringify(windows)).not.toContain('SECRET');
  });

  it('refuses what is not a window list', () => {
    expect(() => parseLs('{"ok": true}')).toThrow();
    expect(() => parseLs('not json')).toThrow();
  });

  it('takes only canonical kitty ids', () => {
    expect(windowIdOf('kitty:12')).toBe(12);
    for (const bad of ['kitty:', 'kitty:1 or id:2', 'kitty:title:x', '%1', 'kitty:-1', 'kitty:1\n']) {
      expect(windowIdOf(bad)).toBeNull();
    }
  });
});

describe('kitty screen text', () => {
  it('parses the cursor kitty appends and strips controls', () => {
    const text = 'a\u0007b\n$ \n\n\n\u001b[?25h\u001b[2;3H\u001b[5 q';
    expect(screenWithCursor(text)).toEqual({ lines: ['ab', '$'], cursor: { x: 2, y: 1 } });
    expect(screenWithCursor('x\n')).toEqual({ lines: ['x'], cursor: null });
  });
});

describe('kitty key bytes', () => {
  const bytes = (word: string) => keyBytes(parseKey(word));
  it('writes each key of the grammar as its legacy terminal bytes', () => {
    expect(bytes('a')).toBe('a');
    expect(bytes('S-a')).toBe('A');
    expect(bytes('C-c')).toBe('\u0003');
    expect(bytes('M-b')).toBe('\u001bb');
    expect(bytes('C-M-x')).toBe('\u001b\u0018');
    expect(bytes('7')).toBe('7');
    expect(bytes('Enter')).toBe('\r');
    expect(bytes('M-Enter')).toBe('\u001b\r');
    expect(bytes('Escape')).toBe('\u001b');
    expect(bytes('Tab')).toBe('\t');
    expect(bytes('S-Tab')).toBe('\u001b[Z');
    expect(bytes('BSpace')).toBe('\u007f');
    expect(bytes('C-Space')).toBe('\u0000');
    expect(bytes('Up')).toBe('\u001b[A');
    expect(bytes('C-Left')).toBe('\u001b[1;5D');
    expect(bytes('S-End')).toBe('\u001b[1;2F');
    expect(bytes('F1')).toBe('\u001bOP');
    expect(bytes('C-F1')).toBe('\u001b[1;5P');
    expect(bytes('F5')).toBe('\u001b[15~');
    expect(bytes('M-F12')).toBe('\u001b[24;3~');
    expect(bytes('PageDown')).toBe('\u001b[6~');
    expect(bytes('Delete')).toBe('\u001b[3~');
  });

  it('refuses a key outside the grammar, never typing it', () => {
    expect(() => keyBytes({ ctrl: false, meta: false, shift: false, base: 'NotAKey' })).toThrow(
      ConnectorError,
    );
    expect(() => keyBytes({ ctrl: true, meta: false, shift: false, base: 'Enter' })).toThrow(
      /E_UNKNOWN_KEY|no bytes/,
    );
  });
});

describe('kitty backend without kitty', () => {
  it('is unavailable without an address, and says why', async () => {
    const backend = new KittyBackend({});
    expect(await backend.available()).toEqual({ ok: false, reason: expect.stringContaining('address') });
    await expect(backend.list()).rejects.toMatchObject({ code: 'E_BACKEND_UNAVAILABLE' });
  });

  it('is unavailable when the binary is missing', async () => {
    const backend = new KittyBackend({ to: 'unix:/nonexistent/kitty.sock', binary: '/nonexistent/kitty' });
    expect(await backend.available()).toEqual({
      ok: false,
      reason: expect.stringContaining('not installed'),
    });
    await expect(backend.list()).rejects.toMatchObject({ code: 'E_BACKEND_UNAVAILABLE' });
  });
});
