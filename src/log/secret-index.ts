import { RUN } from './secret-forms.js';

/**
 * Where secret forms occur in a text, in one pass. Pure: forms and text in, ranges out.
 *
 * Every `RUN`-character window of every form of `RUN` or more characters is indexed by hash. A match
 * of a window at position p covers p..p+11, so it contains the 4 characters at the one position s in
 * p..p+8 that is a multiple of 9 — and those 4 characters are a 4-gram of the form. So the text is
 * sampled every 9 characters: the sample's 4-gram is looked up in a bit filter of the forms' 4-grams
 * (128 KiB), and only on a hit are the 9 windows that can contain it hashed and looked up. Ordinary
 * text costs about one character read per character and rarely a lookup, however many secrets there
 * are — O(text), never O(text × secrets × length). A hit is confirmed by comparing the window, so a
 * collision costs time, never a wrong mask. The union of matching windows is exactly the set of
 * characters inside some run of `RUN` or more characters of a form. Shorter forms are found whole.
 */

/** [start, end) in UTF-16 code units (or bytes, for text read as latin1). */
export type Range = [start: number, end: number];

const BASE = 0x01000193;
/** Sampled n-grams: any RUN-window holds the Q characters at one multiple of STRIDE. */
const Q = 4;
const STRIDE = RUN - Q + 1;
const GRAM_BITS = 20;
const GRAM_MASK = (1 << GRAM_BITS) - 1;

function hashWindow(text: string, at: number): number {
  let h = 0;
  for (let i = at; i < at + RUN; i++) h = (Math.imul(h, BASE) + text.charCodeAt(i)) | 0;
  return h;
}

function gramSlot(text: string, at: number): number {
  let h = text.charCodeAt(at);
  h = Math.imul(h, BASE) ^ text.charCodeAt(at + 1);
  h = Math.imul(h, BASE) ^ text.charCodeAt(at + 2);
  h = Math.imul(h, BASE) ^ text.charCodeAt(at + 3);
  return (h ^ (h >>> GRAM_BITS)) & GRAM_MASK;
}

/**
 * The slot of the 4 bytes at `at` read as one little-endian word (one load, one multiply): the byte
 * scan's own filter (`words`), as `gramSlot` is the text scan's.
 */
const wordSlot = (word: number): number => Math.imul(word, 0x9e3779b1) >>> (32 - GRAM_BITS);

/** Whether this machine stores a word's lowest byte first (the byte scan's words are read so). */
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** hashWindow over bytes read as latin1. */
function hashWindowAt(bytes: Uint8Array, at: number): number {
  let h = 0;
  for (let i = at; i < at + RUN; i++) h = (Math.imul(h, BASE) + (bytes[i] as number)) | 0;
  return h;
}

export class SecretIndex {
  /** Window hash → the windows with that hash. */
  private readonly windows = new Map<number, string[]>();
  /** One bit per 4-gram slot: set when a form holds a 4-gram hashed there. */
  private readonly grams = new Uint32Array((1 << GRAM_BITS) / 32);
  /** The same 4-grams as `grams`, by `wordSlot` of their codes as bytes (low 8 bits of each). */
  private readonly words = new Uint32Array((1 << GRAM_BITS) / 32);
  /** Forms found whole only: those shorter than RUN, and exact values. */
  private readonly literals: string[] = [];

  /** Register one form: all its RUN-windows (`partial`), or itself whole (else, or when shorter). */
  addForm(form: string, partial: boolean): void {
    if (!partial || form.length < RUN) {
      if (!this.literals.includes(form)) this.literals.push(form);
      return;
    }
    for (let i = 0; i + RUN <= form.length; i++) this.addWindow(form.slice(i, i + RUN));
    for (let i = 0; i + Q <= form.length; i++) {
      setBit(this.grams, gramSlot(form, i));
      let word = 0;
      for (let k = Q - 1; k >= 0; k--) word = (word << 8) | (form.charCodeAt(i + k) & 0xff);
      setBit(this.words, wordSlot(word));
    }
  }

  private addWindow(window: string): void {
    const h = hashWindow(window, 0);
    const bucket = this.windows.get(h);
    if (!bucket) this.windows.set(h, [window]);
    else if (!bucket.includes(window)) bucket.push(window);
  }

  /** Every range of `text` holding a form (or a run of RUN of one), merged and in order. */
  ranges(text: string): Range[] {
    const found: Range[] = [];
    if (this.windows.size > 0 && text.length >= RUN) this.scanWindows(text, found);
    for (const literal of this.literals) findLiteral(text, literal, found);
    return mergeRanges(found);
  }

  /**
   * Whether bytes read as latin1 (one character per byte) hold a form, or a run of RUN of one: what
   * `ranges` of their latin1 text finds, answered without making that text, and with whole words: a
   * RUN-window holds the 4 bytes at one position in every 8 (any 9 consecutive positions hold a
   * multiple of 8), so the bytes are sampled every 8 at positions 4-aligned in memory — one aligned
   * word load each, looked up in `words` — and each hit is confirmed by comparing the windows that
   * hold it. The literals are found by the buffer's own search.
   */
  holds(bytes: Uint8Array): boolean {
    if (this.windows.size > 0 && bytes.length >= RUN && this.windowIn(bytes)) return true;
    if (this.literals.length === 0) return false;
    const buffer = Buffer.isBuffer(bytes)
      ? bytes
      : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return this.literals.some((literal) => buffer.indexOf(literal, 0, 'latin1') !== -1);
  }

  private windowIn(bytes: Uint8Array): boolean {
    // A word's bytes are in memory order: the filter is of little-endian words.
    if (!LITTLE_ENDIAN) return true;
    const { words } = this;
    const n = bytes.length;
    // The first position whose address is a multiple of 4, and the words from there.
    const first = (4 - (bytes.byteOffset & 3)) & 3;
    const count = (n - first) >>> 2;
    const all = new Uint32Array(bytes.buffer, bytes.byteOffset + first, count);
    // Every other word: samples 8 bytes apart.
    for (let k = 0; k < count; k += 2) {
      const slot = wordSlot(all[k] as number);
      if (((words[slot >>> 5] as number) & (1 << (slot & 31))) !== 0 && this.windowAt(bytes, first + 4 * k))
        return true;
    }
    return false;
  }

  /** Whether one of the windows that hold the 4 bytes at `sample` is a form's. */
  private windowAt(bytes: Uint8Array, sample: number): boolean {
    const to = Math.min(sample, bytes.length - RUN);
    for (let at = Math.max(0, sample - 2 * 4); at <= to; at++) {
      const bucket = this.windows.get(hashWindowAt(bytes, at));
      if (bucket?.some((window) => sameAt(window, bytes, at))) return true;
    }
    return false;
  }

  private scanWindows(text: string, found: Range[]): void {
    const { grams, windows } = this;
    const lastWindow = text.length - RUN;
    // Matches come in position order: a window overlapping or touching the last range extends it.
    let start = -1;
    let end = -1;
    for (let sample = 0; sample + Q <= text.length; sample += STRIDE) {
      const slot = gramSlot(text, sample);
      if (((grams[slot >>> 5] as number) & (1 << (slot & 31))) === 0) continue;
      // The windows that hold this sample's 4-gram (each position is some sample's, exactly once).
      const to = Math.min(sample, lastWindow);
      for (let at = Math.max(0, sample - STRIDE + 1); at <= to; at++) {
        if (!matchesAt(windows.get(hashWindow(text, at)), text, at)) continue;
        if (at <= end) end = at + RUN;
        else {
          if (end >= 0) found.push([start, end]);
          start = at;
          end = at + RUN;
        }
      }
    }
    if (end >= 0) found.push([start, end]);
  }
}

function setBit(bits: Uint32Array, slot: number): void {
  bits[slot >>> 5] = (bits[slot >>> 5] as number) | (1 << (slot & 31));
}

function matchesAt(bucket: string[] | undefined, text: string, at: number): boolean {
  if (!bucket) return false;
  for (const window of bucket) if (text.startsWith(window, at)) return true;
  return false;
}

/** Whether `bytes` at `at` hold `window`'s latin1 codes. */
function sameAt(window: string, bytes: Uint8Array, at: number): boolean {
  for (let i = 0; i < window.length; i++) if (bytes[at + i] !== window.charCodeAt(i)) return false;
  return true;
}

/** Every occurrence of `literal`, overlapping ones merged as they are found. */
function findLiteral(text: string, literal: string, found: Range[]): void {
  let at = text.indexOf(literal);
  let start = -1;
  let end = -1;
  while (at !== -1) {
    if (at <= end) end = at + literal.length;
    else {
      if (end >= 0) found.push([start, end]);
      start = at;
      end = at + literal.length;
    }
    at = text.indexOf(literal, at + 1);
  }
  if (end >= 0) found.push([start, end]);
}

/** Sorted, with overlapping and touching ranges joined. */
export function mergeRanges(ranges: Range[]): Range[] {
  if (ranges.length < 2) return ranges;
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const out: Range[] = [];
  let [start, end] = sorted[0] as Range;
  for (const [s, e] of sorted.slice(1)) {
    if (s <= end) end = Math.max(end, e);
    else {
      out.push([start, end]);
      [start, end] = [s, e];
    }
  }
  out.push([start, end]);
  return out;
}

/** `text` with each range replaced by `marker`. */
export function replaceRanges(text: string, ranges: readonly Range[], marker: string): string {
  if (ranges.length === 0) return text;
  let out = '';
  let at = 0;
  for (const [start, end] of ranges) {
    out += text.slice(at, start) + marker;
    at = end;
  }
  return out + text.slice(at);
}
