import { describe, expect, it } from 'vitest';
import {
  filterInput,
  flushInput,
  INITIAL_INPUT,
  type InputState,
  inputPending,
} from '../../../src/console/terminal/input-rules.js';

const ESC = '\x1b';

/** Run chunks through the filter as frames arrive, then flush (no frame followed). */
function run(...chunks: string[]): { keep: string; dropped: number; pendingBetween: boolean[] } {
  let state: InputState = INITIAL_INPUT;
  let keep = '';
  let dropped = 0;
  const pendingBetween: boolean[] = [];
  for (const chunk of chunks) {
    const r = filterInput(state, chunk);
    state = r.state;
    keep += r.keep;
    dropped += r.dropped;
    pendingBetween.push(inputPending(state));
  }
  const end = flushInput(state);
  return { keep: keep + end.keep, dropped: dropped + end.dropped, pendingBetween };
}

describe('input rules: keys pass', () => {
  it.each([
    ['printable ASCII', 'hello world', 'hello world'],
    ['UTF-8 text (BMP, astral, combining)', 'héllo → 日本 🎉 é', 'héllo → 日本 🎉 é'],
    [
      'C0 controls: Enter, Tab, Backspace, Ctrl-C, Ctrl-D, Ctrl-Z, NUL',
      '\r\t\x7f\x03\x04\x1a\x00',
      '\r\t\x7f\x03\x04\x1a\x00',
    ],
    ['the Escape key alone', ESC, ESC],
    ['Escape twice', `${ESC}${ESC}`, `${ESC}${ESC}`],
    ['Alt-x, Alt-Enter, Alt-Backspace', `${ESC}x${ESC}\r${ESC}\x7f`, `${ESC}x${ESC}\r${ESC}\x7f`],
    ['cursor keys (normal)', `${ESC}[A${ESC}[B${ESC}[C${ESC}[D`, `${ESC}[A${ESC}[B${ESC}[C${ESC}[D`],
    [
      'cursor keys (application, SS3)',
      `${ESC}OA${ESC}OB${ESC}OH${ESC}OF`,
      `${ESC}OA${ESC}OB${ESC}OH${ESC}OF`,
    ],
    [
      'F1–F4 (SS3) and F5–F12 (CSI ~)',
      `${ESC}OP${ESC}OS${ESC}[15~${ESC}[24~`,
      `${ESC}OP${ESC}OS${ESC}[15~${ESC}[24~`,
    ],
    [
      'modified keys: Ctrl-Right, Shift-Up, Alt-F1',
      `${ESC}[1;5C${ESC}[1;2A${ESC}[1;3P`,
      `${ESC}[1;5C${ESC}[1;2A${ESC}[1;3P`,
    ],
    [
      'Home/End/Insert/Delete/PgUp/PgDn',
      `${ESC}[H${ESC}[F${ESC}[2~${ESC}[3~${ESC}[5~${ESC}[6~`,
      `${ESC}[H${ESC}[F${ESC}[2~${ESC}[3~${ESC}[5~${ESC}[6~`,
    ],
    ['Shift-Tab', `${ESC}[Z`, `${ESC}[Z`],
    ['CSI u and modifyOtherKeys', `${ESC}[97;5u${ESC}[27;5;9~`, `${ESC}[97;5u${ESC}[27;5;9~`],
    [
      'bracketed paste markers around text',
      `${ESC}[200~pasted text\n${ESC}[201~`,
      `${ESC}[200~pasted text\n${ESC}[201~`,
    ],
  ])('%s', (_name, input, expected) => {
    expect(run(input)).toMatchObject({ keep: expected, dropped: 0 });
  });
});

describe('input rules: terminal reports are dropped', () => {
  it.each([
    ['CPR (cursor position report)', `${ESC}[12;40R`],
    ['DA1 reply', `${ESC}[?1;2c`],
    ['DA2 reply (tmux asks CSI > c)', `${ESC}[>0;276;0c`],
    ['DA3 reply (DCS)', `${ESC}P!|00000000${ESC}\\`],
    ['DECRPM', `${ESC}[?2004;1$y`],
    ['DECRPM (ANSI)', `${ESC}[4;2$y`],
    ['focus in / out', `${ESC}[I${ESC}[O`],
    ['SGR mouse press / release', `${ESC}[<0;10;5M${ESC}[<0;10;5m`],
    ['X10 mouse', `${ESC}[M !!`],
    ['X10 mouse with high coordinates', `${ESC}[M\u00e0\u00ff\u00ff`],
    ['window report (CSI t)', `${ESC}[8;24;80t`],
    ['window title report (OSC l)', `${ESC}]lmy title${ESC}\\`],
    ['OSC 52 clipboard reply (BEL)', `${ESC}]52;c;c2VjcmV0\x07`],
    [
      'OSC 10/11 colour replies (ST)',
      `${ESC}]10;rgb:ffff/ffff/ffff${ESC}\\${ESC}]11;rgb:0000/0000/0000${ESC}\\`,
    ],
    ['XTVERSION reply (DCS > |)', `${ESC}P>|xterm.js(5.5.0)${ESC}\\`],
    ['DECRQSS reply', `${ESC}P1$r0;1m${ESC}\\`],
    ['APC, PM and SOS strings', `${ESC}_Gi=1;OK${ESC}\\${ESC}^private${ESC}\\${ESC}Xsos${ESC}\\`],
    ['DSR replies', `${ESC}[0n${ESC}[?10n`],
    ['kitty keyboard flags reply', `${ESC}[?1u`],
    ['8-bit CSI report', '\x9b12;40R'],
    ['8-bit OSC with 8-bit ST', '\x9d52;c;eA==\x9c'],
    ['lone C1 controls', '\x85\x8d'],
    ['a CSI too long to be a key', `${ESC}[${'1;'.repeat(40)}A`],
    ['a control inside a CSI', `${ESC}[1\rA`],
  ])('%s', (_name, report) => {
    const r = run(report);
    expect(r.keep).toBe('');
    expect(r.dropped).toBeGreaterThan(0);
  });

  it('keeps the keys around reports', () => {
    const r = run(`ab${ESC}[12;40Rc${ESC}[?1;2cd${ESC}]11;rgb:0/0/0\x07e${ESC}[<0;1;1Mf${ESC}[Ig`);
    expect(r.keep).toBe('abcdefg');
    expect(r.dropped).toBe(5);
  });

  it('an OSC string ended by another ESC sequence drops the string and reads the sequence', () => {
    expect(run(`${ESC}]52;c;abc${ESC}[Ax`)).toMatchObject({ keep: `${ESC}[Ax` });
  });

  it('an OSC reply split across frames is dropped whole', () => {
    const r = run(`x${ESC}]52;c;c2Vj`, 'cmV0', `${ESC}`, '\\y');
    expect(r.keep).toBe('xy');
    expect(r.pendingBetween).toEqual([true, true, true, false]);
  });

  it.each([
    ['after ESC', [ESC, '[12;40R']],
    ['after ESC [', [`${ESC}[`, '12;40R']],
    ['inside the parameters', [`${ESC}[12;`, '40R']],
    ['SGR mouse split', [`${ESC}[<0;1`, '0;5M']],
    ['X10 mouse split in the coordinates', [`${ESC}[M `, '!!']],
    ['DA2 split one character per frame', [...`${ESC}[>0;276;0c`]],
  ])('a report split %s is dropped whole', (_name, chunks) => {
    const r = run(...(chunks as string[]), 'k');
    expect(r.keep).toBe('k');
    expect(r.dropped).toBe(1);
  });

  it('a key split across frames still passes', () => {
    expect(run(`${ESC}[1;`, '5C').keep).toBe(`${ESC}[1;5C`);
    expect(run(ESC, 'OA').keep).toBe(`${ESC}OA`);
  });

  it('flush: a bare ESC is the Escape key, a half-read report is dropped', () => {
    expect(flushInput(filterInput(INITIAL_INPUT, ESC).state).keep).toBe(ESC);
    expect(flushInput(filterInput(INITIAL_INPUT, `${ESC}[`).state).keep).toBe(`${ESC}[`);
    expect(flushInput(filterInput(INITIAL_INPUT, `${ESC}O`).state).keep).toBe(`${ESC}O`);
    expect(flushInput(filterInput(INITIAL_INPUT, `${ESC}[12;4`).state)).toMatchObject({
      keep: '',
      dropped: 1,
    });
    expect(flushInput(filterInput(INITIAL_INPUT, `${ESC}]52;c;abc`).state)).toMatchObject({
      keep: '',
      dropped: 1,
    });
    expect(flushInput(INITIAL_INPUT)).toMatchObject({ keep: '', dropped: 0 });
  });
});
