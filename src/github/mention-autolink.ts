/**
 * GitHub's extended autolinks (cmark-gfm's `extensions/autolink.c`): `http://`, `https://`,
 * `ftp://` and `www.` in text become links up to the next space or `<`. They matter to
 * `mention.ts` because a link's characters are its text, read as nothing else: a backslash in one
 * escapes nothing, a backtick opens no code span. Outside any open bracket only, as there.
 */

const ASCII_PUNCTUATION = /[!-/:-@[-`{-~]/;
const isAlpha = (c: string | undefined) => c !== undefined && /[A-Za-z]/.test(c);
const isSpace = (c: string | undefined) =>
  c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\f' || c === '\v';

/** A host character: neither a space nor punctuation (cmark-gfm's `is_valid_hostchar`). */
function hostChar(t: string, i: number): boolean {
  const c = t.codePointAt(i);
  if (c === undefined) return false;
  const ch = String.fromCodePoint(c);
  if (c < 128) return !isSpace(ch) && !ASCII_PUNCTUATION.test(ch);
  return !/[\s\p{P}]/u.test(ch);
}

/** The length of the domain at `at` (0: not one; `short`: no dot needed), as `check_domain`. */
function domain(t: string, at: number, short: boolean): number {
  let dots = 0;
  let underscores = 0;
  let before = 0;
  let i = 1;
  for (; at + i < t.length - 1; i++) {
    const c = t[at + i];
    if (c === '_') underscores++;
    else if (c === '.') {
      before = underscores;
      underscores = 0;
      dots++;
    } else if (c !== '-' && !hostChar(t, at + i)) break;
    else if ((c?.charCodeAt(0) ?? 0) >= 128) {
      // cmark-gfm reads bytes: the next byte of a multi-byte character is no host character.
      i++;
      break;
    }
  }
  if (before > 0 || underscores > 0) return 0;
  return short || dots > 0 ? i : 0;
}

/** Where a link ending at `end` really ends: before a `<`, trailing punctuation, unmatched `)`. */
function trim(t: string, from: number, end: number, find: (n: string, f: number) => number): number {
  const lt = find('<', from);
  let to = lt >= 0 && lt < end ? lt : end;
  let opens = -1;
  let closes = 0;
  while (to > from) {
    const c = t[to - 1] ?? '';
    if ('?!.,:*_~\'"'.includes(c)) to--;
    else if (c === ';') {
      let k = to - 2;
      while (k > from && isAlpha(t[k])) k--;
      to = k < to - 2 && t[k] === '&' ? k : to - 1;
    } else if (c === ')') {
      if (opens < 0) {
        opens = 0;
        for (let k = from; k < to; k++) {
          if (t[k] === '(') opens++;
          else if (t[k] === ')') closes++;
        }
      }
      if (closes <= opens) break;
      closes--;
      to--;
    } else break;
  }
  return to;
}

/**
 * At `:` or `w` (position `i` of text), an extended autolink: where it starts and ends, or null.
 * `space(from)` is the next whitespace at or after `from` (or the end).
 */
export function autolink(
  t: string,
  i: number,
  find: (n: string, f: number) => number,
  space: (from: number) => number,
): { start: number; end: number } | null {
  if (t[i] === ':') {
    if (t[i + 1] !== '/' || t[i + 2] !== '/') return null;
    let start = i;
    while (start > 0 && isAlpha(t[start - 1])) start--;
    const scheme = t.slice(start, i).toLowerCase();
    if (!['http', 'https', 'ftp'].includes(scheme) || !hostChar(t, i + 3)) return null;
    const length = domain(t, i + 3, true);
    if (length === 0) return null;
    const end = trim(t, i, Math.max(space(i + 3 + length), i + 3 + length), find);
    return end > i ? { start, end } : null;
  }
  const before = t[i - 1];
  if (i > 0 && !isSpace(before) && !'*_~('.includes(before ?? '')) return null;
  if (!t.startsWith('www.', i)) return null;
  const length = domain(t, i, false);
  if (length === 0) return null;
  const end = trim(t, i, Math.max(space(i + length), i + length), find);
  return end > i ? { start: i, end } : null;
}
