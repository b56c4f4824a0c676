import { describe, expect, it } from 'vitest';
import { parseKeysRequest, planKeys } from '../../src/runners/keys.js';

describe('planKeys (sessions keys)', () => {
  it('types words in a row as one text with their spaces', () => {
    expect(planKeys(['typed', 'text', 'here'])).toEqual([{ key: 'typed text here', literal: true }]);
  });

  it('keeps named keys apart, and texts around them', () => {
    expect(planKeys(['Escape', 'git', 'status', 'Enter', 'y', 'es'])).toEqual([
      { key: 'Escape', literal: false },
      { key: 'git status', literal: true },
      { key: 'Enter', literal: false },
      { key: 'y es', literal: true },
    ]);
  });

  it('strips control characters and drops words left empty', () => {
    expect(planKeys(['a\u001b[31m', '\u0007', 'b'])).toEqual([{ key: 'a[31m b', literal: true }]);
  });
});

describe('parseKeysRequest (the keys socket)', () => {
  it('refuses literal text with control characters, whole', () => {
    const r = parseKeysRequest(JSON.stringify({ keys: ['Enter', 'a\u001b'] }));
    expect(r.ok).toBe(false);
  });
});
