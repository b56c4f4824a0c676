import { describe, expect, it } from 'vitest';
import { keyWord, kittyKeyName, parseKey, parseKeys, tmuxKeyName } from '../../src/connector/keys.js';
import { ConnectorError } from '../../src/connector/names.js';

function codeOf(fn: () => unknown): { code: string; message: string } | null {
  try {
    fn();
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(ConnectorError);
    return { code: (error as ConnectorError).code, message: (error as Error).message };
  }
}

describe('key grammar', () => {
  it('parses modifiers in any order, each once', () => {
    expect(parseKey('C-M-a')).toEqual({ ctrl: true, meta: true, shift: false, base: 'a' });
    expect(parseKey('M-C-a')).toEqual(parseKey('C-M-a'));
    expect(parseKey('S-Tab')).toEqual({ ctrl: false, meta: false, shift: true, base: 'Tab' });
    expect(parseKey('C-M-S-Up')).toEqual({ ctrl: true, meta: true, shift: true, base: 'Up' });
    expect(parseKeys(['Escape', 'y', 'Enter', 'F12', '7'])).toHaveLength(5);
  });

  it.each([
    'NotAKey',
    'C-c ',
    '-l',
    'C-',
    '',
    'C-C-a',
    'c-a',
    'ctrl+a',
    'F13',
    'F0',
    'A',
    'ab',
    'Enter\n',
    'C-\u0441', // Cyrillic es, a look-alike of c
    'Ｃ-c',
    'Е nter',
    '\u001b[201~',
    'x'.repeat(40),
    'C-Enter',
    'S-Enter',
    'C-Tab',
    'S-Space',
    'S-Escape',
    'C-BSpace',
    'C-0',
    'S-1',
    'BTab',
    'PPage',
    'IC',
  ])('refuses %j as E_UNKNOWN_KEY, never text', (word) => {
    const error = codeOf(() => parseKey(word));
    expect(error?.code).toBe('E_UNKNOWN_KEY');
    // The bad word is quoted (controls escaped) and bounded.
    expect(error?.message).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    expect(error?.message.length).toBeLessThan(300);
  });

  it('refuses a whole list when one word is bad', () => {
    expect(codeOf(() => parseKeys(['Enter', 'NotAKey']))?.code).toBe('E_UNKNOWN_KEY');
    expect(codeOf(() => parseKeys(['Enter', 'NotAKey']))?.message).toContain('"NotAKey"');
  });

  it('names keys as tmux 3.3a takes them', () => {
    const t = (w: string) => tmuxKeyName(parseKey(w));
    expect(t('S-Tab')).toBe('BTab');
    expect(t('M-S-Tab')).toBe('M-BTab');
    expect(t('Insert')).toBe('IC');
    expect(t('Delete')).toBe('DC');
    expect(t('PageUp')).toBe('PPage');
    expect(t('PageDown')).toBe('NPage');
    expect(t('C-S-PageUp')).toBe('C-S-PPage');
    expect(t('C-M-a')).toBe('C-M-a');
    expect(t('S-a')).toBe('A');
    expect(t('M-S-z')).toBe('M-Z');
    expect(t('C-Space')).toBe('C-Space');
    expect(t('M-Enter')).toBe('M-Enter');
    expect(t('F5')).toBe('F5');
  });

  it('names keys in kitty send-key syntax', () => {
    const k = (w: string) => kittyKeyName(parseKey(w));
    expect(k('C-M-a')).toBe('ctrl+alt+a');
    expect(k('S-Tab')).toBe('shift+tab');
    expect(k('Enter')).toBe('enter');
    expect(k('PageUp')).toBe('page_up');
    expect(k('PageDown')).toBe('page_down');
    expect(k('F5')).toBe('f5');
    expect(k('Insert')).toBe('insert');
    expect(k('Delete')).toBe('delete');
    expect(k('BSpace')).toBe('backspace');
    expect(k('S-Up')).toBe('shift+up');
  });

  it('round-trips a key to its word', () => {
    for (const w of ['C-M-S-F1', 'M-x', 'Escape', 'C-Space']) expect(keyWord(parseKey(w))).toBe(w);
  });

  it('refuses a Key object outside the grammar when naming it', () => {
    expect(codeOf(() => tmuxKeyName({ ctrl: false, meta: false, shift: false, base: 'NotAKey' }))?.code).toBe(
      'E_UNKNOWN_KEY',
    );
    expect(codeOf(() => kittyKeyName({ ctrl: true, meta: false, shift: false, base: 'Enter' }))?.code).toBe(
      'E_UNKNOWN_KEY',
    );
  });
});
