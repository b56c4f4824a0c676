/**
 * Whose words start work? A mention counts only in the text its author wrote and GitHub shows as
 * theirs: not in a quotation of someone else (`>` lines, nested, and the lazy lines GitHub folds into
 * a quote), not in code (fenced, indented, inline spans), not in an HTML comment (invisible on the
 * page). The reading follows CommonMark as GitHub renders it, block structure first, then inline. It
 * is an approximation, and where it could differ from GitHub it reads text as *not* the author's: a
 * missed mention is typed again, a false one runs an outsider's words. `docs/github.md` has the rule.
 */

interface Opened {
  /** The line after its indentation and list markers. */
  content: string;
  /** Columns of indentation before `content`, within its innermost list item. */
  indent: number;
  /** Columns from the start of the line to `content`. */
  column: number;
  /** The first list marker on the line (`-`, `1.`), when the line opens a list item. */
  marker: string | null;
}

const THEMATIC_BREAK = /^(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$/;
const LIST_MARKER = /^(?:[-+*]|\d{1,9}[.)])(?=[ \t]|$)/;
const ATX_HEADING = /^#{1,6}(?:[ \t]|$)/;
const FENCE = /^(?:(`{3,})[^`]*|(~{3,}).*)$/;

/** Columns of leading whitespace (tabs to the next multiple of 4) and where the text starts. */
function measure(text: string, from = 0): { indent: number; start: number } {
  let indent = 0;
  let i = 0;
  for (; i < text.length; i++) {
    if (text[i] === ' ') indent++;
    else if (text[i] === '\t') indent += 4 - ((from + indent) % 4);
    else break;
  }
  return { indent, start: i };
}

/** Strip a line's indentation and the list markers that open list items on it. */
function open(line: string): Opened {
  let rest = line;
  let column = 0;
  let marker: string | null = null;
  // Eight nested list items on one line are more than anyone writes; the cap keeps a hostile line of
  // thousands of markers linear.
  for (let depth = 0; ; depth++) {
    const { indent, start } = measure(rest, column);
    const body = rest.slice(start);
    const m = indent <= 3 && depth < 8 && !THEMATIC_BREAK.test(body) ? LIST_MARKER.exec(body) : null;
    if (!m) return { content: body, indent, column: column + indent, marker };
    marker ??= m[0];
    const after = body.slice(m[0].length);
    const gap = measure(after, column + indent + m[0].length);
    column += indent + m[0].length;
    // One to four spaces after a marker belong to it; with five or more the content is indented code.
    if (gap.indent >= 5 || gap.start === after.length) {
      column += 1;
      rest = after.slice(1);
    } else {
      column += gap.indent;
      rest = after.slice(gap.start);
    }
  }
}

const isFence = (o: Opened) => o.indent <= 3 && FENCE.test(o.content);
const startsComment = (o: Opened) => o.indent <= 3 && o.content.startsWith('<!--');

/** A line that ends a quote's paragraph instead of continuing it lazily (CommonMark 5.1). */
function interrupts(o: Opened): boolean {
  if (o.indent > 3) return false;
  if (isFence(o) || startsComment(o) || ATX_HEADING.test(o.content) || THEMATIC_BREAK.test(o.content))
    return true;
  // Only a bullet item or an item numbered 1, with text, may interrupt a paragraph.
  return o.marker !== null && /^(?:[-+*]|0*1[.)])$/.test(o.marker) && o.content.trim() !== '';
}

interface Block {
  text: string;
  /** An HTML block: raw HTML, where only comments hide text (no code spans, no escapes). */
  html: boolean;
}

type Mode =
  | { kind: 'text' }
  | { kind: 'fence'; closer: RegExp; column: number }
  | { kind: 'indented-code' }
  | { kind: 'comment' };

interface Reading {
  out: Block[];
  paragraph: string[];
  comment: string[];
  mode: Mode;
  /** The last line was quoted text that a following line may continue lazily. */
  lazy: boolean;
}

const flush = (r: Reading) => {
  if (r.paragraph.length > 0) r.out.push({ text: r.paragraph.join('\n'), html: false });
  r.paragraph = [];
};

/** A line inside a fence, a comment block or indented code: true when that block took it. */
function insideBlock(r: Reading, line: string): boolean {
  const { mode } = r;
  if (mode.kind === 'fence') {
    const { indent, start } = measure(line);
    // Indented no more than its opener (or three spaces): within the list item that holds it.
    if (indent <= Math.max(3, mode.column) && mode.closer.test(line.slice(start))) r.mode = { kind: 'text' };
    return true;
  }
  if (mode.kind === 'comment') {
    r.comment.push(line);
    if (line.includes('-->')) {
      r.out.push({ text: r.comment.join('\n'), html: true });
      r.mode = { kind: 'text' };
    }
    return true;
  }
  if (mode.kind === 'indented-code') {
    if (line.trim() === '' || measure(line).indent >= 4) return true;
    r.mode = { kind: 'text' };
  }
  return false;
}

/** A line that opens a block: a fence, a comment block or indented code. True when it did. */
function opensBlock(r: Reading, line: string, o: Opened): boolean {
  if (o.indent >= 4) {
    // Indented code cannot interrupt a paragraph: after one, the line continues it.
    if (r.paragraph.length > 0 && o.marker === null) {
      r.paragraph.push(line);
      return true;
    }
    flush(r);
    r.mode = { kind: 'indented-code' };
    return true;
  }
  if (isFence(o)) {
    flush(r);
    const run = FENCE.exec(o.content);
    const fence = run?.[1] ?? run?.[2] ?? '```';
    const closer = new RegExp(`^${fence.charAt(0)}{${fence.length},}[ \t]*$`);
    r.mode = { kind: 'fence', closer, column: o.column };
    return true;
  }
  if (startsComment(o)) {
    flush(r);
    r.comment = [line];
    if (line.indexOf('-->', line.indexOf('<!--') + 2) >= 0) r.out.push({ text: line, html: true });
    else r.mode = { kind: 'comment' };
    return true;
  }
  return false;
}

/** Block structure: the paragraphs, headings and HTML blocks that are neither quoted nor code. */
function blocks(markdown: string): Block[] {
  const r: Reading = { out: [], paragraph: [], comment: [], mode: { kind: 'text' }, lazy: false };
  for (const line of markdown.split('\n')) {
    if (insideBlock(r, line)) continue;
    if (line.trim() === '') {
      flush(r);
      r.lazy = false;
      continue;
    }
    const o = open(line);
    if (o.content.startsWith('>')) {
      // Quoted, at any indentation: in a list item, or (indented 4+) code or literal text — hidden
      // either way. A quote whose text goes on takes the next lines lazily, as GitHub shows them.
      flush(r);
      r.lazy = o.content.replace(/^(?:>[ \t]*)+/, '') !== '';
      continue;
    }
    if (r.lazy) {
      if (!interrupts(o)) continue;
      r.lazy = false;
    }
    if (opensBlock(r, line, o)) continue;
    const heading = ATX_HEADING.test(o.content);
    if (THEMATIC_BREAK.test(o.content) || o.marker !== null || heading) flush(r);
    if (!THEMATIC_BREAK.test(o.content)) r.paragraph.push(line);
    if (heading) flush(r);
  }
  if (r.mode.kind === 'comment') r.out.push({ text: r.comment.join('\n'), html: true });
  flush(r);
  return r.out;
}

const ESCAPABLE = /[!-/:-@[-`{-~]/;
/** An inline HTML tag, which is not shown (its attributes are not text). */
const TAG =
  /<(?:[A-Za-z][A-Za-z0-9-]*(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:[^\s"'=<>`]+|'[^']*'|"[^"]*"))?)*\s*\/?|\/[A-Za-z][A-Za-z0-9-]*\s*)>/y;
/** Autolinks, shown as their text. */
const AUTOLINK =
  /<(?:[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*|[\w.!#$%&'*+/=?^`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)>/y;

/** Where a sticky pattern's match at `at` ends, or -1. */
function matchAt(pattern: RegExp, text: string, at: number): number {
  pattern.lastIndex = at;
  return pattern.test(text) ? pattern.lastIndex : -1;
}

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

/**
 * The text of one block as shown, left to right as CommonMark reads inlines: code spans, HTML
 * comments, tags and autolinks, whichever starts first. `open` is true when an HTML comment
 * never ends: then nothing after it counts.
 */
function inline(block: Block): { text: string; open: boolean } {
  const { text, html } = block;
  const runs = html ? new Map<number, number[]>() : backtickRuns(text);
  const special = html ? /</g : /[\\`<]/g;
  const out: string[] = [];
  let i = 0;
  while (i < text.length) {
    // Copy plain text up to the next character that may start something.
    special.lastIndex = i;
    const next = special.exec(text)?.index ?? text.length;
    out.push(text.slice(i, next));
    i = next;
    if (i >= text.length) break;
    const c = text.charAt(i);
    if (c === '\\') {
      const escaped = ESCAPABLE.test(text.charAt(i + 1));
      out.push(escaped ? text.charAt(i + 1) : c);
      i += escaped ? 2 : 1;
    } else if (c === '`') {
      const span = spanEnd(text, i, runs);
      out.push(span.end < 0 ? '`'.repeat(span.length) : ' ');
      i = span.end < 0 ? i + span.length : span.end;
    } else if (text.startsWith('<!--', i)) {
      // `<!-->` and `<!--->` are complete (empty) comments, as browsers read them.
      const end = text.indexOf('-->', i + 2);
      if (end < 0) return { text: out.join(''), open: true };
      out.push(' ');
      i = end + 3;
    } else {
      const link = html ? -1 : matchAt(AUTOLINK, text, i);
      const tag = html || link > 0 ? -1 : matchAt(TAG, text, i);
      out.push(link > 0 ? text.slice(i, link) : tag > 0 ? ' ' : c);
      i = link > 0 ? link : tag > 0 ? tag : i + 1;
    }
  }
  return { text: out.join(''), open: false };
}

/**
 * The words of a comment (issue or PR body, review) that its author wrote and GitHub shows as
 * theirs: quotes, code and HTML comments removed; an unterminated HTML comment hides the rest.
 */
export function authorText(markdown: string): string {
  const shown: string[] = [];
  for (const block of blocks(markdown.replace(/\r\n?/g, '\n'))) {
    const { text, open } = inline(block);
    shown.push(text);
    if (open) break;
  }
  return shown.join('\n\n');
}

/** `@the-loop` as a whole mention in plain text: not `@the-loop-bot`, not `me@the-loop.dev`. */
export function mentionsIn(text: string | null | undefined, mention: string): boolean {
  if (!text) return false;
  const escaped = mention.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^A-Za-z0-9_@./-])${escaped}(?![A-Za-z0-9_-])`, 'i').test(text);
}

/** Whether the author of a Markdown comment mentions `mention` in their own words. */
export function mentions(markdown: string | null | undefined, mention: string): boolean {
  return Boolean(markdown) && mentionsIn(authorText(markdown as string), mention);
}
