/**
 * The inline reading of one Markdown block for `mention.ts`, left to right as CommonMark reads it:
 * code spans, HTML (comments, tags, instructions, declarations), autolinks and escapes, whichever
 * starts first; then links, whose destinations and titles are not shown, and images, whose
 * descriptions are not either; link reference definitions at a paragraph's start are invisible.
 */
import { autolink } from './mention-autolink.js';
import { commentEnd, finder, type Reading, reread, type Span, show, TAG } from './mention-html.js';

const ESCAPABLE = /[!-/:-@[-`{-~]/;
/** Autolinks, shown as their text. */
const AUTOLINK =
  /<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[\w.!#$%&'*+/=?^`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)>/y;
const SPECIAL = /[\\`<![\]:w]/g;

/** Start positions of the maximal backtick runs of each length, in order. */
function backtickRuns(text: string): Map<number, number[]> {
  const runs = new Map<number, number[]>();
  for (const m of text.matchAll(/`+/g)) {
    const list = runs.get(m[0].length) ?? [];
    list.push(m.index);
    runs.set(m[0].length, list);
  }
  return runs;
}

/** The end of the code span opened by the backtick run at `at`, or -1 when nothing closes it. */
function spanEnd(text: string, at: number, runs: Map<number, number[]>): { length: number; end: number } {
  let length = 0;
  while (text[at + length] === '`') length++;
  // The first run of the same length after this one (binary search: a comment may hold thousands).
  const starts = runs.get(length) ?? [];
  let lo = 0;
  let hi = starts.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((starts[mid] ?? 0) < at + length) lo = mid + 1;
    else hi = mid;
  }
  const closer = starts[lo];
  return { length, end: closer === undefined ? -1 : closer + length };
}

const skipSpace = (t: string, i: number) => {
  while (t[i] === ' ' || t[i] === '\t' || t[i] === '\n') i++;
  return i;
};

/** The end of a link destination at `i` (CommonMark 6.3), or -1. */
function destination(t: string, i: number): number {
  if (t[i] === '<') {
    for (let j = i + 1; j < t.length; j++) {
      if (t[j] === '>') return j + 1;
      if (t[j] === '\n' || t[j] === '<') return -1;
      if (t[j] === '\\' && PUNCTUATION.test(t[j + 1] ?? '')) j++;
    }
    return -1;
  }
  let depth = 0;
  let j = i;
  for (; j < t.length; j++) {
    const c = t.charCodeAt(j);
    if (c <= 0x20 || c === 0x7f) break;
    if (c === 0x5c && PUNCTUATION.test(t[j + 1] ?? '')) j++;
    else if (c === 0x28 && ++depth > 32) return -1;
    else if (c === 0x29 && depth-- === 0) break;
  }
  return j > i && depth <= 0 ? Math.min(j, t.length) : -1;
}

/** The end of a link title at `i` (`"…"`, `'…'` or `(…)`), or -1. */
function title(t: string, i: number): number {
  const close = t[i] === '(' ? ')' : t[i];
  if (close !== '"' && close !== "'" && close !== ')') return -1;
  for (let j = i + 1; j < t.length; j++) {
    if (t[j] === close) return j + 1;
    if (t[j] === '\\') j++;
    else if (close === ')' && t[j] === '(') return -1;
  }
  return -1;
}

/** The end of `(destination "title")` after a link's text, `open` at its `(`; -1 if there is none. */
function linkTail(t: string, open: number): number {
  const i = skipSpace(t, open + 1);
  if (t[i] === ')') return i + 1;
  const dest = destination(t, i);
  if (dest < 0) return -1;
  const k = skipSpace(t, dest);
  if (t[k] === ')') return k + 1;
  const end = k > dest ? title(t, k) : -1;
  const z = end < 0 ? -1 : skipSpace(t, end);
  return z >= 0 && t[z] === ')' ? z + 1 : -1;
}

const lineEnd = (t: string, i: number) => {
  const nl = t.indexOf('\n', i);
  return nl < 0 ? t.length : nl + 1;
};
const blankTo = (t: string, i: number) => /^[ \t]*$/.test(t.slice(i, lineEnd(t, i)).replace(/\n$/, ''));

const PUNCTUATION = /[!-/:-@[-`{-~]/;

/** A link label at `[` (CommonMark 6.3): its text and end, or null. */
function label(t: string, i: number): { text: string; end: number } | null {
  for (let j = i + 1; j < t.length && j - i <= 1000; j++) {
    if (t[j] === '[') return null;
    if (t[j] === ']') return /\S/.test(t.slice(i + 1, j)) ? { text: t.slice(i + 1, j), end: j + 1 } : null;
    if (t[j] === '\\' && PUNCTUATION.test(t[j + 1] ?? '')) j++;
  }
  return null;
}

/** A label as references match it: case-folded, whitespace collapsed. */
const normalize = (text: string) =>
  text
    .trim()
    .replace(/[ \t\n]+/g, ' ')
    .toUpperCase()
    .toLowerCase();

/**
 * Where the link reference definitions at the start of a paragraph end (0: there are none); their
 * labels go into `labels`.
 */
export function definitions(t: string, labels?: Set<string>): number {
  let pos = 0;
  for (;;) {
    let i = pos;
    while (t[i] === ' ' || t[i] === '\t') i++;
    const l = t[i] === '[' ? label(t, i) : null;
    if (!l || t[l.end] !== ':') return pos;
    const dest = destination(t, skipSpace(t, l.end + 1));
    if (dest < 0) return pos;
    const w = skipSpace(t, dest);
    const end = w > dest ? title(t, w) : -1;
    if (end >= 0 && blankTo(t, end)) pos = lineEnd(t, end);
    else if (blankTo(t, dest)) pos = lineEnd(t, dest);
    else return pos;
    labels?.add(normalize(l.text));
  }
}

/** A declaration: `<!` and a letter (0.31), or uppercase letters and a space (0.29). */
const DECLARATION = { '0.29': /<![A-Z]+[ \t\n]/y, '0.31': /<![A-Za-z]/y };
function declaration(r: Reading, t: string, i: number): boolean {
  const pattern = DECLARATION[r.version];
  pattern.lastIndex = i;
  return pattern.test(t);
}

/** Where a comment, instruction or declaration at `<` ends (0: there is none; -1: it never ends). */
function inlineHtml(r: Reading, t: string, i: number, find: (n: string, f: number) => number): number {
  if (t.startsWith('<!--', i)) {
    if (r.version === '0.31') {
      if (t.startsWith('<!-->', i) || t.startsWith('<!--->', i)) return t.indexOf('>', i) + 1;
      const end = find('-->', i + 4);
      if (end >= 0) reread(r, t, commentEnd(t, i, find), end + 3);
      return end < 0 ? -1 : end + 3;
    }
    // 0.29: no `--` inside, not starting with `>` or `->`; otherwise `<!--` is text.
    if (find('-->', i + 4) < 0) return -1;
    const dashes = t.indexOf('--', i + 4);
    const ok = t[dashes + 2] === '>' && !t.startsWith('>', i + 4) && !t.startsWith('->', i + 4);
    return ok ? dashes + 3 : 0;
  }
  const close = t.startsWith('<?', i)
    ? '?>'
    : t.startsWith('<![CDATA[', i)
      ? ']]>'
      : declaration(r, t, i)
        ? '>'
        : '';
  if (close) {
    const end = find(close, i + 2);
    if (end >= 0) reread(r, t, find('>', i + 2) + 1, end + close.length);
    return end < 0 ? 0 : end + close.length;
  }
  return 0;
}

interface Bracket {
  at: number;
  image: boolean;
  /** Inside a link that formed: a link cannot hold another, so this one no longer opens. */
  active: boolean;
}

interface Inline {
  r: Reading;
  b: Span;
  /** Openers of `[` and `![` not yet closed, in order; how many are images, how many active. */
  brackets: Bracket[];
  images: number;
  active: number;
}

/** Where a link or image closed by the `]` at `i` ends (CommonMark 6.3), or -1 if none does. */
function linkEnd(s: Inline, opener: Bracket, i: number): number {
  const t = s.b.text;
  const tail = t[i + 1] === '(' ? linkTail(t, i + 1) : -1;
  if (tail > 0) return tail;
  const full = t[i + 1] === '[' ? label(t, i + 1) : null;
  if (full) return s.r.labels.has(normalize(full.text)) ? full.end : -1;
  // A label is at most 999 characters: a longer text names no definition (and is not copied).
  const from = opener.at + (opener.image ? 2 : 1);
  if (i - from > 999 || !s.r.labels.has(normalize(t.slice(from, i)))) return -1;
  return t.startsWith('[]', i + 1) ? i + 3 : i + 1;
}

/** A `]`: a link hides its destination and title, an image all of itself. Returns where to go on. */
function closeBracket(s: Inline, i: number): number {
  const opener = s.brackets.pop();
  if (opener?.image) s.images--;
  if (opener?.active) s.active--;
  const end = opener?.active ? linkEnd(s, opener, i) : -1;
  if (!opener || end < 0) {
    show(s.r, s.b, i, i + 1);
    return i + 1;
  }
  if (opener.image && s.b.at >= 0) {
    // The whole image, found hidden only now that it closed.
    s.r.cut[s.b.at + opener.at] = (s.r.cut[s.b.at + opener.at] ?? 0) + 1;
    s.r.cut[s.b.at + end] = (s.r.cut[s.b.at + end] ?? 0) - 1;
  }
  if (!opener.image) {
    // Earlier `[` no longer open links (up to one already closed: linear, as cmark does it).
    for (let k = s.brackets.length - 1; k >= 0; k--) {
      const b = s.brackets[k];
      if (!b || b.image) continue;
      if (!b.active) break;
      b.active = false;
      s.active--;
    }
  }
  return end;
}

/** A `<`: an autolink (shown), HTML (hidden; tags open and close elements) or text. */
function openAngle(s: Inline, i: number, find: (n: string, f: number) => number): number {
  const { r, b } = s;
  const t = b.text;
  AUTOLINK.lastIndex = i;
  if (AUTOLINK.test(t)) {
    show(r, b, i + 1, AUTOLINK.lastIndex - 1);
    return AUTOLINK.lastIndex;
  }
  const end = inlineHtml(r, t, i, find);
  if (end !== 0) return end;
  TAG.lastIndex = i;
  const tag = TAG.exec(t);
  if (!tag) {
    show(r, b, i, i + 1);
    return i + 1;
  }
  r.elements.tag(tag[1] ?? tag[2] ?? '', tag[2] !== undefined, s.images > 0);
  return TAG.lastIndex;
}

/** Nothing after this point counts: an image still open may have been one, so it is hidden too. */
function cutImages(s: Inline): void {
  const first = s.brackets.find((b) => b.image);
  if (first && s.b.at >= 0) s.r.cut[s.b.at + first.at] = (s.r.cut[s.b.at + first.at] ?? 0) + 1;
}

/** The next whitespace at or after a position (or the end), remembered like `finder`. */
function spaces(t: string): (from: number) => number {
  const pattern = /[ \t\n\r\f\v]/g;
  let last = { from: Number.POSITIVE_INFINITY, at: -1 };
  return (from) => {
    if (last.from <= from && from <= last.at) return last.at;
    pattern.lastIndex = from;
    last = { from, at: pattern.exec(t)?.index ?? t.length };
    return last.at;
  };
}

/** Read one Markdown block (a paragraph, a heading, a table cell) into `r`. */
export function readMarkdown(r: Reading, b: Span, paragraph: boolean): void {
  const t = b.text;
  const runs = backtickRuns(t);
  const find = finder(t);
  const s: Inline = { r, b, brackets: [], images: 0, active: 0 };
  const space = spaces(t);
  let i = paragraph ? definitions(t) : 0;
  while (i < t.length) {
    SPECIAL.lastIndex = i;
    const next = SPECIAL.exec(t)?.index ?? t.length;
    show(r, b, i, next);
    if (next >= t.length) return;
    const c = t.charAt(next);
    i = next + 1;
    if (c === '\\') {
      const escaped = ESCAPABLE.test(t.charAt(next + 1));
      show(r, b, next, next + 1, escaped ? 1 : 2);
      if (escaped) show(r, b, next + 1, next + 2);
      i = escaped ? next + 2 : next + 1;
    } else if (c === '`') {
      const span = spanEnd(t, next, runs);
      if (span.end < 0) show(r, b, next, next + span.length);
      i = span.end < 0 ? next + span.length : span.end;
    } else if (c === '<') {
      i = openAngle(s, next, find);
      if (i < 0) r.open = true;
      if (r.open) {
        cutImages(s);
        return;
      }
    } else if (c === ']') i = closeBracket(s, next);
    else if (c === ':' || c === 'w') {
      const link = s.active === 0 ? autolink(t, next, find, space) : null;
      show(r, b, next, link ? link.end : next + 1);
      i = link ? link.end : next + 1;
    } else {
      const image = c === '!';
      if (!image || t[next + 1] === '[') {
        s.brackets.push({ at: next, image, active: true });
        s.active++;
      }
      if (image && t[next + 1] === '[') s.images++;
      const to = image && t[next + 1] === '[' ? next + 2 : next + 1;
      show(r, b, next, to);
      i = to;
    }
  }
}
