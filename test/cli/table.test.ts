import { describe, expect, it } from 'vitest';
import { table } from '../../src/cli/format.js';

describe('table', () => {
  it('prints clean rows as they are and cleans only the cells of a row that needs it', () => {
    const out = table(
      ['A', 'B'],
      [
        ['plain', 'x'],
        ['\u001b[31mred\u001b[0m', 'tab\there'],
        ['bidi\u202eevil', 'line\nbreak'],
      ],
    );
    expect(out.split('\n')).toEqual([
      'A         B',
      'plain     x',
      'red       tab here',
      'bidievil  line break',
      '',
    ]);
    // No control character, and the widths are those of what is printed.
    expect(out).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202a-\u202e]/);
  });
});
