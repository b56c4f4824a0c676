/**
 * Outside text (todo items, errors, refs, reasons) made inert for a comment we post on GitHub: no
 * secret (the caller's scrub), no control or reordering character, one line, bounded, and escaped so
 * it cannot open Markdown structure, HTML (our hidden marker included), a link, a table, or ping a
 * person or a bot (`@the-loop fix` in a todo must never read as a trigger). Pure.
 */
import { stripControls } from '../core/text.js';

export type Scrub = (text: string) => string;

/**
 * Zero-width joiner put after `@` and before the digits of `#12`: GitHub then neither links the
 * mention (no notification) nor the reference (no cross-reference event in that issue), and the text
 * still reads the same.
 */
const ZWJ = '\u200d';

/** Characters CommonMark and GitHub act on inside a line; a backslash makes each literal. */
const MARKDOWN_INLINE = /[\\`*_[\]|~]/g;
/**
 * What a command quoted in our own text may hold to be shown as code. A code span is literal on
 * GitHub (no mention, no reference, no HTML), so what it holds is left as it is: a person copies it.
 */
const COMMAND_CHARS = /^[\w .:=,/+@#%<>…-]+$/;
/** What would start a block at the start of a line: heading, quote, list, setext underline. */
const LEADING_MARK = /^(\s*)([#>+=-])/;
/** An ordered list item's start: its `.` or `)` is escaped. */
const LEADING_NUMBER = /^(\s*\d+)([.)])/;

/** Scrub, strip controls, collapse whitespace: plain one-line text, not yet bounded or escaped. */
function cleanLine(text: string, scrub: Scrub): string {
  // Scrub before and after stripping: a secret split by a control character is whole only after it.
  const once = stripControls(scrub(text));
  return scrub(once)
    .replace(/[\s\u200b\u200e\u200f\u061c\ufeff]+/g, ' ')
    .trim();
}

/** At most `max` characters (UTF-16 units, never splitting a pair), an ellipsis when cut. */
export function bound(text: string, max: number): string {
  if (text.length <= max) return text;
  let cut = text.slice(0, Math.max(0, max - 1));
  if (/[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  return `${cut}…`;
}

/**
 * Mentions, references and autolinks defused with a zero-width joiner: the text reads the same,
 * pings no one and links nowhere.
 */
export function defuse(text: string): string {
  return (
    text
      .replace(/@/g, `@${ZWJ}`)
      .replace(/#(?=\d)/g, `#${ZWJ}`)
      // GitHub links bare URLs and `www.` by itself (and a link to an issue mentions it there):
      // broken with a joiner, outside text stays readable and links nowhere.
      .replace(/:\/\//g, `:/${ZWJ}/`)
      .replace(/\bwww\./gi, (w) => `${w.slice(0, 3)}${ZWJ}.`)
  );
}

/** Plain one-line text (a check title, a commit status description): scrubbed, clean, defused, bounded. */
export function plainText(text: string, scrub: Scrub, max: number): string {
  return bound(defuse(cleanLine(text, scrub)), max);
}

/** Escapes Markdown and HTML in text that is already one clean line. */
export function escapeMarkdown(text: string): string {
  const escaped = defuse(text)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(MARKDOWN_INLINE, (c) => `\\${c}`);
  return escaped
    .replace(LEADING_MARK, (_all, space: string, mark: string) => `${space}\\${mark}`)
    .replace(LEADING_NUMBER, (_all, digits: string, mark: string) => `${digits}\\${mark}`);
}

/** Outside text for an inline place in the comment: scrubbed, one line, bounded, escaped. */
export function inlineText(text: string, scrub: Scrub, max: number): string {
  return escapeMarkdown(bound(cleanLine(text, scrub), max));
}

/**
 * Text of our own making that may quote a command in backticks (what releases a held session): each
 * backtick pair becomes a code span (its content clean, without backticks; a code span shows
 * everything literally and pings no one), the rest is escaped as outside text.
 */
export function inlineWithCode(text: string, scrub: Scrub, max: number): string {
  const clean = bound(cleanLine(text, scrub), max);
  const parts = clean.split('`');
  // An odd count of backticks leaves the last part outside any span.
  const closed = parts.length % 2 === 1 ? parts : [...parts.slice(0, -2), `${parts.at(-2)}${parts.at(-1)}`];
  return closed
    .map((part, i) => {
      if (i % 2 === 0) return escapeMarkdown(part);
      const code = part.trim();
      // Only a command's characters make a code span; anything else (a marker, HTML) is escaped text.
      if (!COMMAND_CHARS.test(code)) return escapeMarkdown(code);
      return `\`${code}\``;
    })
    .join('');
}

/** An id we print in code (a session id, a delivery id): only characters no context acts on. */
export function safeId(id: string, max = 100): string {
  return id.replace(/[^A-Za-z0-9._:-]/g, '').slice(0, max);
}

/** A commit SHA shown short, or undefined when it is not hex. */
export function shortSha(sha: string | undefined): string | undefined {
  return sha !== undefined && /^[0-9a-f]{7,64}$/i.test(sha) ? sha.slice(0, 12).toLowerCase() : undefined;
}

/** An http(s) URL safe inside `(…)` of a Markdown link, or undefined. */
export function safeUrl(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') return undefined;
  // URL's serialisation percent-encodes spaces, quotes and angle brackets; parentheses and the rest
  // that could end the link are encoded here.
  const href = parsed.href.replace(
    /[()[\]\\`*_|~]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
  return href.length <= 2000 ? href : undefined;
}
