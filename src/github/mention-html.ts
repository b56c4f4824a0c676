/**
 * HTML in a comment, for `mention.ts`: which elements hide their content, where HTML blocks start
 * and end (CommonMark 4.6), and raw HTML read as a browser reads it. Everything here errs the same
 * way: when in doubt, the text is not the author's.
 */

/**
 * Elements whose content is not the author's own words: quotations and code (as `>` and backticks
 * are), and text a page never shows (scripts, templates, fallbacks, ruby parentheses). `details`
 * is not here: its content is shown when it is opened.
 */
const QUOTE_CODE_UNSHOWN = [
  'blockquote',
  'q',
  'pre',
  'code',
  'kbd',
  'samp',
  'tt',
  'rp',
  'template',
  'object',
];
/** Raw text: a browser reads no tag inside them but their own end tag. */
const RAW_TEXT = new Set(
  'script style textarea title xmp iframe noembed noframes noscript plaintext'.split(' '),
);
const HIDING = new Set([...QUOTE_CODE_UNSHOWN, 'audio', 'video', ...RAW_TEXT]);

/** The hiding elements open at a point of the comment, counted per name (nesting, stray end tags). */
export class Elements {
  private readonly counts = new Map<string, number>();
  private total = 0;
  private raw = 0;

  hiding(): boolean {
    return this.total > 0;
  }

  /**
   * A start or end tag. `keepOpen`: an end tag that may not reach the page (inside an image's
   * description) closes nothing. Inside a raw-text element only its own end tag closes.
   */
  tag(tagName: string, closing: boolean, keepOpen = false): void {
    const name = tagName.toLowerCase();
    if (!HIDING.has(name)) return;
    const open = this.counts.get(name) ?? 0;
    const raw = RAW_TEXT.has(name) ? 1 : 0;
    if (!closing) {
      this.counts.set(name, open + 1);
      this.total++;
      this.raw += raw;
    } else if (open > 0 && !keepOpen && (raw === 1 || this.raw === 0)) {
      this.counts.set(name, open - 1);
      this.total--;
      this.raw -= raw;
    }
  }
}

/**
 * CommonMark as cmark-gfm 0.29 (GitHub's renderer) reads it, or as the current text, 0.31: they
 * differ on what an HTML comment and a declaration are, and on `<textarea>` and `<search>` blocks.
 */
export type Version = '0.29' | '0.31';

/** One reading of a comment: what it shows so far, and the elements open at this point. */
export interface Reading {
  /** Per character of the comment: 0 not the author's, 1 not shown (an escaping `\`), 2 shown. */
  mask: Uint8Array;
  /** Ranges found hidden after they were read (an image's description): +1 at start, -1 at end. */
  cut: Int32Array;
  elements: Elements;
  /** Something never ended (a comment, a tag, an attribute): nothing after it counts. */
  open: boolean;
  version: Version;
  /** The labels of the comment's link reference definitions, as references match them. */
  labels: Set<string>;
}

/** A block's text and where it sits in the comment (`at` < 0: it is not the author's anyway). */
export interface Span {
  text: string;
  at: number;
  hidden: boolean;
}

/** Mark `text[from, to)` of a block shown, unless the block or an open element hides it. */
export function show(r: Reading, b: Span, from: number, to: number, value = 2): void {
  if (b.hidden || b.at < 0 || to <= from || r.elements.hiding()) return;
  r.mask.fill(value, b.at + from, b.at + to);
}

/** `indexOf` that remembers, so that many unterminated openers do not each search to the end. */
export function finder(text: string): (needle: string, from: number) => number {
  const last = new Map<string, { from: number; at: number }>();
  return (needle, from) => {
    const seen = last.get(needle);
    if (seen && seen.from <= from && (seen.at < 0 || seen.at >= from)) return seen.at;
    const at = text.indexOf(needle, from);
    last.set(needle, { from, at });
    return at;
  };
}

const ATTRIBUTES = String.raw`(?:\s+[A-Za-z_:][\w.:-]*(?:\s*=\s*(?:[^\s"'=<>\x60]+|'[^']*'|"[^"]*"))?)*`;
/** A complete start or end tag in CommonMark's grammar (what Markdown passes through as HTML). */
export const TAG = new RegExp(
  `<([A-Za-z][A-Za-z0-9-]*)${ATTRIBUTES}\\s*\\/?>|<\\/([A-Za-z][A-Za-z0-9-]*)\\s*>`,
  'y',
);
const LONE_TAG = new RegExp(`^(?:${TAG.source})[ \\t]*$`);

const BLOCK_NAMES =
  'address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|param|section|source|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul';
const OTHER_STARTS: [RegExp, RegExp][] = [
  [/^<!--/, /-->/],
  [/^<\?/, /\?>/],
  [/^<![A-Z]/, />/],
  [/^<!\[CDATA\[/, /\]\]>/],
];
const STARTS: Record<Version, [RegExp, RegExp][]> = {
  '0.29': [[/^<(?:pre|script|style)(?:[\s>]|$)/i, /<\/(?:pre|script|style)>/i], ...OTHER_STARTS],
  '0.31': [
    [/^<(?:pre|script|style|textarea)(?:[\s>]|$)/i, /<\/(?:pre|script|style|textarea)>/i],
    ...OTHER_STARTS,
    [/^<![a-z]/, />/],
  ],
};
const TYPE_6: Record<Version, RegExp> = {
  '0.29': new RegExp(`^</?(?:${BLOCK_NAMES})(?:[\\s>]|/>|$)`, 'i'),
  '0.31': new RegExp(`^</?(?:${BLOCK_NAMES}|search)(?:[\\s>]|/>|$)`, 'i'),
};

/**
 * Whether `content` (a line after its indentation) starts an HTML block: undefined if not; else
 * what ends it — a line matching the pattern (that line included), or `null` for a blank line.
 * `paragraph`: a paragraph is open, which a lone tag (type 7) cannot interrupt.
 */
export function htmlBlockStart(
  content: string,
  paragraph: boolean,
  version: Version,
): RegExp | null | undefined {
  if (!content.startsWith('<')) return undefined;
  for (const [start, end] of STARTS[version]) if (start.test(content)) return end;
  // Type 7 comes after type 1, which takes the start tags it excludes (`</pre>` is type 7).
  return TYPE_6[version].test(content) || (!paragraph && LONE_TAG.test(content)) ? null : undefined;
}

const isLetter = (c: string | undefined) => c !== undefined && /[A-Za-z]/.test(c);
const isSpace = (c: string | undefined) => c === ' ' || c === '\t' || c === '\n' || c === '\f' || c === '\r';

/** A browser's start or end tag at `at`: its name and where it ends (-1: it never does). */
function browserTag(t: string, at: number): { name: string; end: number } {
  let i = t[at + 1] === '/' ? at + 2 : at + 1;
  const from = i;
  while (i < t.length && !isSpace(t[i]) && t[i] !== '/' && t[i] !== '>') i++;
  const name = t.slice(from, i);
  for (;;) {
    while (isSpace(t[i]) || t[i] === '/') i++;
    if (i >= t.length) return { name, end: -1 };
    if (t[i] === '>') return { name, end: i + 1 };
    i++; // the first character of an attribute's name may be anything, `=` included
    while (i < t.length && !isSpace(t[i]) && t[i] !== '/' && t[i] !== '>' && t[i] !== '=') i++;
    while (isSpace(t[i])) i++;
    if (t[i] !== '=') continue;
    i++;
    while (isSpace(t[i])) i++;
    const quote = t[i];
    if (quote === '"' || quote === "'") {
      const close = t.indexOf(quote, i + 1);
      if (close < 0) return { name, end: -1 };
      i = close + 1;
    } else while (i < t.length && !isSpace(t[i]) && t[i] !== '>') i++;
  }
}

/** Where a browser ends the comment at `i` (`<!-->`, `<!--->`, `-->` or `--!>`); -1: never. */
export function commentEnd(t: string, i: number, find: (n: string, f: number) => number): number {
  if (t.startsWith('<!-->', i)) return i + 5;
  if (t.startsWith('<!--->', i)) return i + 6;
  const dashes = find('-->', i + 4);
  const bang = find('--!>', i + 4);
  if (bang >= 0 && (dashes < 0 || bang < dashes)) return bang + 4;
  return dashes < 0 ? -1 : dashes + 3;
}

/**
 * Raw HTML that Markdown passed through whole, up to `to`, which a browser ends earlier, at `end`
 * (an instruction at its first `>`): what follows is HTML again, and its tags open and close.
 */
export function reread(r: Reading, t: string, end: number, to: number): void {
  if (end > 0 && end < to) readRaw(r, { text: t.slice(end, to), at: -1, hidden: true });
}

/** Where the construct at `<` ends, as a browser reads it (-1: never; 0: `<` is just text). */
function rawConstruct(r: Reading, t: string, i: number, find: (n: string, f: number) => number): number {
  if (t.startsWith('<!--', i)) return commentEnd(t, i, find);
  const next = t[i + 1];
  const endTag = next === '/' && isLetter(t[i + 2]);
  if (isLetter(next) || endTag) {
    const tag = browserTag(t, i);
    if (tag.end < 0) return -1;
    r.elements.tag(tag.name, endTag);
    const name = tag.name.toLowerCase();
    if (endTag || !RAW_TEXT.has(name)) return tag.end;
    // Raw text runs to its own end tag, read next; the text between is hidden with the element.
    const close = new RegExp(`</${name}(?=[\\s/>]|$)`, 'gi');
    close.lastIndex = tag.end;
    return close.exec(t)?.index ?? -1;
  }
  // `<!…>`, `<?…>` and `</` not followed by a letter are bogus comments, up to the next `>`.
  if (next === '!' || next === '?' || next === '/') {
    const end = find('>', i + 2);
    return end < 0 ? -1 : end + 1;
  }
  return 0;
}

/** An HTML block, read as raw HTML: text shown unless an element hides it. */
export function readRaw(r: Reading, b: Span): void {
  const t = b.text;
  const find = finder(t);
  let i = 0;
  while (i < t.length) {
    const lt = t.indexOf('<', i);
    const next = lt < 0 ? t.length : lt;
    show(r, b, i, next);
    if (next >= t.length) return;
    const end = rawConstruct(r, t, next, find);
    if (end < 0) {
      r.open = true;
      return;
    }
    if (end === 0) show(r, b, next, next + 1);
    i = end === 0 ? next + 1 : end;
  }
}
