/**
 * Whose words start work? A mention counts only in the text its author wrote and GitHub shows as
 * theirs: not in a quotation of someone else (`>` lines, nested, the lazy lines GitHub folds into a
 * quote, `<blockquote>` and `<q>`), not in code (fenced, indented, spans, `<pre>`, `<code>`, `<kbd>`
 * …), not in anything the page does not show (HTML comments, tags and their attributes, link
 * destinations and titles, image descriptions, link reference definitions, `<script>` …).
 *
 * The reading follows cmark-gfm, GitHub's renderer: block structure first (`mention-blocks.ts`),
 * then inline (`mention-inline.ts`), then the HTML that reaches the page (`mention-html.ts`). It is
 * an approximation, and where it could differ from GitHub it reads text as *not* the author's: a
 * missed mention is typed again, a false one runs an outsider's words. Where two versions of
 * CommonMark read a comment differently (what an HTML comment is, where some HTML blocks end), it
 * is read both ways, and only what both show counts. `docs/github.md` has the rule.
 */
import { readBlocks } from './mention-blocks.js';
import { Elements, type Reading, readRaw, type Version } from './mention-html.js';
import { definitions, readMarkdown } from './mention-inline.js';

/** What one reading of the comment shows, per character (see `Reading.mask`). */
function read(doc: string, version: Version): Uint8Array {
  const blocks = readBlocks(doc, version);
  // References resolve against definitions anywhere in the comment, before or after them.
  const labels = new Set<string>();
  for (const block of blocks) if (block.kind === 'paragraph') definitions(block.text, labels);
  const r: Reading = {
    mask: new Uint8Array(doc.length),
    cut: new Int32Array(doc.length + 1),
    elements: new Elements(),
    open: false,
    version,
    labels,
  };
  for (const block of blocks) {
    if (block.kind === 'html') readRaw(r, block);
    else readMarkdown(r, block, block.kind === 'paragraph');
    if (r.open) break;
  }
  let cut = 0;
  for (let i = 0; i < doc.length; i++) {
    cut += r.cut[i] ?? 0;
    if (cut > 0) r.mask[i] = 0;
  }
  return r.mask;
}

/**
 * The words of a comment (issue or PR body, review) that its author wrote and GitHub shows as
 * theirs; whatever else stood between them becomes a space. Character references (`&#64;`) are
 * kept as written, not decoded.
 */
export function authorText(markdown: string): string {
  const doc = markdown.replace(/\r\n?/g, '\n');
  const one = read(doc, '0.29');
  const other = read(doc, '0.31');
  const out: string[] = [];
  let gap = false;
  for (let i = 0; i < doc.length; ) {
    const state = Math.min(one[i] ?? 0, other[i] ?? 0);
    let j = i + 1;
    while (j < doc.length && Math.min(one[j] ?? 0, other[j] ?? 0) === state) j++;
    if (state === 2) out.push(doc.slice(i, j));
    else if (state === 0 && !gap) out.push(' ');
    gap = state === 0 || (state === 1 && gap);
    i = j;
  }
  return out.join('');
}

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The patterns of a mention, compiled once each (the router asks for every delivery). */
const patterns = new Map<string, { whole: RegExp; possible: RegExp }>();
function patternsOf(mention: string): { whole: RegExp; possible: RegExp } {
  let found = patterns.get(mention);
  if (!found) {
    found = {
      whole: new RegExp(`(^|[^A-Za-z0-9_@./-])${escapeRegExp(mention)}(?![A-Za-z0-9_-])`, 'i'),
      // authorText keeps characters of the comment in order: it drops escaping backslashes without a
      // trace, turns what is not shown into a space, and adds nothing else. So the mention can be in
      // its result only if the comment holds it with at most backslashes between its characters.
      possible: new RegExp(mention.split('').map(escapeRegExp).join('\\\\*'), 'i'),
    };
    if (patterns.size > 16) patterns.clear();
    patterns.set(mention, found);
  }
  return found;
}

/** `@the-loop` as a whole mention in plain text: not `@the-loop-bot`, not `me@the-loop.dev`. */
export function mentionsIn(text: string | null | undefined, mention: string): boolean {
  if (!text) return false;
  return patternsOf(mention).whole.test(text);
}

/**
 * Whether the author of a Markdown comment mentions `mention` in their own words. A comment that
 * cannot hold it (most do not) is not read at all: the answer is the same, the reading skipped.
 */
export function mentions(markdown: string | null | undefined, mention: string): boolean {
  if (!markdown) return false;
  // A space in the result may be one authorText put there: only a mention without one is filtered.
  if (!/\s/.test(mention) && !patternsOf(mention).possible.test(markdown)) return false;
  return mentionsIn(authorText(markdown), mention);
}
