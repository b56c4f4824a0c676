/**
 * Block structure of a comment for `mention.ts`, line by line as cmark-gfm (GitHub's renderer)
 * reads it: list items by their content columns, paragraphs continued by every line that cannot
 * interrupt them, quotes (read by a nested parser of their own), fences, indented code, HTML blocks
 * and tables. Out come the blocks whose text may be shown: paragraphs, headings, table cells and
 * HTML blocks, each marked `hidden` when it is someone else's (inside a quote) — hidden blocks are
 * still read, for the HTML elements they open and close.
 */
import { htmlBlockStart, type Span, type Version } from './mention-html.js';

export interface Block extends Span {
  /** `paragraph` may start with link reference definitions; `inline` is a heading or a cell. */
  kind: 'paragraph' | 'inline' | 'html';
}

interface Line {
  text: string;
  /** Where `text` starts in the comment; -1 inside a quote. */
  at: number;
}

interface Item {
  /** The column where the item's content starts; a line indented this far continues it. */
  column: number;
  /** Opened with nothing after its marker, and no line since: a blank line ends it. */
  empty: boolean;
}

const THEMATIC_BREAK = /^(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$/;
const LIST_MARKER = /^(?:[-+*]|\d{1,9}[.)])(?=[ \t]|$)/;
const ATX_HEADING = /^#{1,6}(?:[ \t]|$)/;
const FENCE = /^(?:(`{3,})[^`]*|(~{3,}).*)$/;
const SETEXT = /^(?:=+|-+)[ \t]*$/;
const DELIMITER_ROW = /^\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;

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

interface Opened {
  /** The list items this line opens, outermost first. */
  items: Item[];
  /** The line after its indentation and list markers, and where that starts in the line. */
  content: string;
  offset: number;
  /** Columns of indentation before `content`, relative to its container. */
  indent: number;
  /** The first item may interrupt a paragraph: a bullet or number 1, with text after it. */
  interrupts: boolean;
}

/** Strip a line's indentation and the list markers that open items on it (`base`: its container). */
function open(line: string, base: number): Opened {
  const items: Item[] = [];
  let column = 0;
  let offset = 0;
  let container = base;
  let interrupts = false;
  // Eight nested items on one line are more than anyone writes; the cap keeps hostile lines linear.
  for (let depth = 0; ; depth++) {
    const rest = line.slice(offset);
    const { indent, start } = measure(rest, column);
    const body = rest.slice(start);
    const rel = column + indent - container;
    const m = rel <= 3 && depth < 8 && !THEMATIC_BREAK.test(body) ? LIST_MARKER.exec(body) : null;
    if (!m) return { items, content: body, offset: offset + start, indent: rel, interrupts };
    const end = column + indent + m[0].length;
    const after = body.slice(m[0].length);
    const gap = measure(after, end);
    const empty = gap.start === after.length;
    if (depth === 0) interrupts = !empty && /^(?:[-+*]|0*1[.)])$/.test(m[0]);
    // One to four spaces after a marker belong to it; with five or more the content is indented code.
    const wide = empty || gap.indent >= 5;
    container = end + (wide ? 1 : gap.indent);
    items.push({ column: container, empty });
    column = container;
    offset += start + m[0].length + (empty ? gap.start : wide ? 1 : gap.start);
  }
}

/**
 * Whether a line starts a block where something is open: `paragraph` (only what may interrupt a
 * paragraph), `lazy` (a line below a paragraph's container: anything but indented code) or `table`.
 */
function startsBlock(o: Opened, where: 'paragraph' | 'lazy' | 'table', version: Version): boolean {
  if (o.items.length > 0) return where !== 'paragraph' || o.interrupts;
  if (o.indent >= 4) return where === 'table';
  const c = o.content;
  if (c.startsWith('>') || FENCE.test(c) || ATX_HEADING.test(c) || THEMATIC_BREAK.test(c)) return true;
  return htmlBlockStart(c, where === 'paragraph', version) !== undefined;
}

/** A table row's cells: split at each `|` not after a backslash, outer pipes dropped. */
function cells(line: Line): Line[] {
  const t = line.text;
  let from = measure(t).start;
  let end = t.length;
  while (end > from && (t[end - 1] === ' ' || t[end - 1] === '\t')) end--;
  if (t[from] === '|') from++;
  if (end > from && t[end - 1] === '|' && t[end - 2] !== '\\') end--;
  const out: Line[] = [];
  for (let i = from; i <= end; i++) {
    if (i < end && (t[i] !== '|' || t[i - 1] === '\\')) continue;
    out.push({ text: t.slice(from, i), at: line.at < 0 ? -1 : line.at + from });
    from = i + 1;
  }
  return out;
}

const stripQuote = (content: string) => content.replace(/^>[ \t]?/, '');

type Leaf =
  | { kind: 'none' }
  | { kind: 'paragraph'; lines: Line[]; hidden: boolean }
  | { kind: 'fence'; closer: RegExp }
  | { kind: 'code' }
  | { kind: 'html'; end: RegExp | null; lines: Line[]; hidden: boolean }
  | { kind: 'table'; hidden: boolean }
  | { kind: 'quote'; inner: Parser };

/** One line, as the open blocks see it. */
interface Seen {
  raw: string;
  at: number;
  /** The line after its indentation, list markers kept; its indentation past its container. */
  lead: string;
  indent: number;
  /** Every open list item continues on this line. */
  all: boolean;
  o: Opened;
}

const NONE: Leaf = { kind: 'none' };

class Parser {
  private readonly items: Item[] = [];
  private leaf: Leaf = NONE;
  /**
   * A quote's paragraph was ended by a line that CommonMark's text calls a lazy continuation and
   * cmark reads as a new block (an item numbered 2, an empty item, a lone tag): the blocks that
   * follow, up to a blank line or a line that interrupts a paragraph, are read but not the author's.
   */
  private lazyHide = false;

  constructor(
    private readonly out: Block[],
    private readonly hidden: boolean,
    private readonly depth: number,
    private readonly version: Version,
  ) {}

  line(raw: string, at: number): void {
    if (/^[ \t]*$/.test(raw)) {
      this.blank(raw, at);
      return;
    }
    const { indent, start } = measure(raw);
    let matched = 0;
    while (matched < this.items.length && (this.items[matched]?.column ?? 0) <= indent) matched++;
    const base = matched > 0 ? (this.items[matched - 1]?.column ?? 0) : 0;
    for (const item of this.items.slice(0, matched)) item.empty = false;
    const o = open(raw, base);
    const seen: Seen = {
      raw,
      at,
      lead: raw.slice(start),
      indent: indent - base,
      all: matched === this.items.length,
      o,
    };
    if (this.lazyHide && startsBlock(o, 'paragraph', this.version)) this.lazyHide = false;
    if (this.continues(seen)) return;
    this.close();
    this.items.length = matched;
    this.start(seen);
  }

  /** Close every open block. */
  close(): void {
    const leaf = this.leaf;
    if (leaf.kind === 'paragraph') this.paragraph(leaf.lines, leaf.hidden);
    else if (leaf.kind === 'html') this.emit(leaf.lines, leaf.hidden, 'html');
    else if (leaf.kind === 'quote') leaf.inner.close();
    this.leaf = NONE;
  }

  /** The innermost open block is a paragraph, which a lazy line would continue. */
  lazyTip(): boolean {
    const leaf = this.leaf;
    return leaf.kind === 'paragraph' || (leaf.kind === 'quote' && leaf.inner.lazyTip());
  }

  lazy(raw: string): void {
    const leaf = this.leaf;
    if (leaf.kind === 'paragraph') leaf.lines.push({ text: raw, at: -1 });
    else if (leaf.kind === 'quote') leaf.inner.lazy(raw);
  }

  private emit(lines: Line[], hidden: boolean, kind: Block['kind']): void {
    const text = lines.map((l) => l.text).join('\n');
    this.out.push({ text, at: lines[0]?.at ?? -1, hidden: hidden || this.hidden, kind });
  }

  private paragraph(lines: Line[], hidden: boolean): void {
    if (lines.length > 0) this.emit(lines, hidden, 'paragraph');
  }

  private row(line: Line, hidden: boolean): void {
    for (const cell of cells(line)) this.emit([cell], hidden, 'inline');
  }

  private blank(raw: string, at: number): void {
    this.lazyHide = false;
    const leaf = this.leaf;
    if (leaf.kind === 'html' && leaf.end !== null) leaf.lines.push({ text: raw, at });
    else if (leaf.kind !== 'fence' && leaf.kind !== 'code') this.close();
    while (this.items.at(-1)?.empty) this.items.pop();
  }

  /** Whether the open block takes the line. */
  private continues(s: Seen): boolean {
    const leaf = this.leaf;
    switch (leaf.kind) {
      case 'none':
        return false;
      case 'fence':
        if (s.all && s.indent <= 3 && leaf.closer.test(s.lead)) this.leaf = NONE;
        return s.all;
      case 'code':
        return s.all && s.indent >= 4;
      case 'html':
        if (!s.all) return false;
        leaf.lines.push({ text: s.raw, at: s.at });
        if (leaf.end?.test(s.raw)) this.close();
        return true;
      case 'table':
        if (!s.all || startsBlock(s.o, 'table', this.version)) return false;
        this.row({ text: s.raw, at: s.at }, leaf.hidden);
        return true;
      case 'paragraph':
        return this.paragraphLine(s, leaf);
      case 'quote':
        return this.quoteLine(s, leaf.inner);
    }
  }

  private paragraphLine(s: Seen, leaf: Leaf & { kind: 'paragraph' }): boolean {
    const line = { text: s.raw, at: s.at };
    // Below the paragraph's list item (lazy), only a block start ends it; indented, nothing does.
    if (!s.all && startsBlock(s.o, 'lazy', this.version)) return false;
    if (!s.all || s.indent >= 4) {
      leaf.lines.push(line);
      return true;
    }
    if (SETEXT.test(s.lead)) {
      this.close(); // a heading now; the underline is not text
      return true;
    }
    if (startsBlock(s.o, 'paragraph', this.version)) return false;
    const header = leaf.lines.at(-1);
    if (header && DELIMITER_ROW.test(s.lead) && cells(header).length === cells(line).length) {
      // A table: the paragraph's last line is its header, the lines before stay a paragraph.
      this.paragraph(leaf.lines.slice(0, -1), leaf.hidden);
      this.row(header, leaf.hidden);
      this.leaf = { kind: 'table', hidden: leaf.hidden };
      return true;
    }
    leaf.lines.push(line);
    return true;
  }

  private quoteLine(s: Seen, inner: Parser): boolean {
    if (s.all && s.indent <= 3 && s.lead.startsWith('>')) {
      inner.line(stripQuote(s.lead), -1);
      return true;
    }
    const lazy = inner.lazyTip();
    if (lazy && !startsBlock(s.o, 'lazy', this.version)) {
      inner.lazy(s.raw);
      return true;
    }
    this.lazyHide = lazy && !startsBlock(s.o, 'paragraph', this.version);
    return false;
  }

  /** A line that opens new blocks (after any open block it could not continue was closed). */
  private start(s: Seen): void {
    const { o } = s;
    this.items.push(...o.items);
    const hidden = this.lazyHide;
    const line = { text: o.content, at: s.at < 0 ? -1 : s.at + o.offset };
    if (o.content === '') return; // an empty list item
    if (o.indent >= 4) {
      this.leaf = { kind: 'code' };
    } else if (o.content.startsWith('>') && this.depth < 8) {
      const inner = new Parser(this.out, true, this.depth + 1, this.version);
      inner.line(stripQuote(o.content), -1);
      this.leaf = { kind: 'quote', inner };
    } else if (FENCE.test(o.content)) {
      const run = FENCE.exec(o.content);
      const fence = run?.[1] ?? run?.[2] ?? '```';
      this.leaf = { kind: 'fence', closer: new RegExp(`^${fence.charAt(0)}{${fence.length},}[ \t]*$`) };
    } else if (ATX_HEADING.test(o.content)) {
      this.emit([line], hidden, 'inline');
    } else if (!THEMATIC_BREAK.test(o.content)) {
      const end = htmlBlockStart(o.content, false, this.version);
      if (end === undefined) this.leaf = { kind: 'paragraph', lines: [line], hidden };
      else {
        this.leaf = { kind: 'html', end, lines: [line], hidden };
        if (end?.test(o.content)) this.close();
      }
    }
  }
}

/** The blocks of a comment (line endings already `\n`) under one version of CommonMark, in order. */
export function readBlocks(markdown: string, version: Version): Block[] {
  const out: Block[] = [];
  const parser = new Parser(out, false, 0, version);
  let at = 0;
  for (const raw of markdown.split('\n')) {
    parser.line(raw, at);
    at += raw.length + 1;
  }
  parser.close();
  return out;
}
