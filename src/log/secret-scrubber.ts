import { MIN_SECRET, type SecretKind, secretForms } from './secret-forms.js';
import { mergeRanges, type Range, replaceRanges, SecretIndex } from './secret-index.js';

const SECRET_MARK = '[secret]';
const TOKEN_MARK = '[token]';

/**
 * Replaces registered secret values by a marker. Every credential the process learns is registered
 * here so no log line, stored event, file or console output can carry it, even by accident: whole,
 * in part (any run of 12 characters), reversed, or base64-encoded (see secret-forms.ts).
 */
export class SecretScrubber {
  private readonly kinds = new Map<string, SecretKind>();
  private readonly patterns: RegExp[] = [];
  private textIndex: SecretIndex | undefined;
  /** The forms as UTF-8 bytes read as latin1 (only differs from the text index for non-ASCII secrets). */
  private byteIndex: SecretIndex | undefined;
  private ascii = true;
  private changes = 0;

  /**
   * Register a value. `key` (the default: credentials, tokens) masks its every form; `exact` only
   * the whole value (see `SecretKind`). A value registered both ways is a key.
   */
  add(value: string | undefined, kind: SecretKind = 'key'): void {
    // Very short values would redact ordinary words; credentials are never that short.
    if (!value || value.length < MIN_SECRET) return;
    const had = this.kinds.get(value);
    if (had === kind || had === 'key') return;
    this.kinds.set(value, kind);
    this.changes++;
    const forms = secretForms(value, kind);
    // Indexes already built are extended rather than rebuilt (a token is added per session).
    for (const form of forms) {
      this.textIndex?.addForm(form, kind === 'key');
      this.byteIndex?.addForm(latin1Of(form), kind === 'key');
      if (!/^[\x00-\x7f]*$/.test(form)) this.ascii = false;
    }
  }

  /**
   * Mask every match of a pattern (global), whoever minted it: the gateway's capability tokens have
   * a fixed shape, so one made by another process (a TUI started by an earlier daemon) is masked too.
   */
  addPattern(pattern: RegExp): void {
    if (!pattern.global) throw new Error('a scrub pattern must be global');
    this.patterns.push(pattern);
    this.changes++;
  }

  /** Moves on every registration: what was scanned clean before may not be clean now. */
  get generation(): number {
    return this.changes;
  }

  scrub = (text: string): string => {
    let out = text;
    if (this.kinds.size > 0 && text.length >= MIN_SECRET) {
      out = replaceRanges(text, this.index().ranges(text), SECRET_MARK);
    }
    for (const pattern of this.patterns) out = out.replace(pattern, TOKEN_MARK);
    return out;
  };

  /**
   * Whether `text`, the UTF-8 decoding of `bytes`, may hold something `scrub` masks; false means
   * `scrub(text) === text` — what ingress asks of every body before it scrubs one, at a fraction of
   * the cost. The secrets are looked for in the bytes (SecretIndex.holds: a word load per sample),
   * exactly for ASCII forms — a run of ASCII characters of the text is the same run of its bytes —
   * so always true while a secret has other characters; the patterns in the text.
   */
  mayHold = (bytes: Uint8Array, text: string): boolean => {
    if (this.kinds.size > 0 && text.length >= MIN_SECRET) {
      if (!this.ascii || this.index().holds(bytes)) return true;
    }
    for (const pattern of this.patterns) {
      pattern.lastIndex = 0;
      const found = pattern.test(text);
      pattern.lastIndex = 0;
      if (found) return true;
    }
    return false;
  };

  /**
   * Where secrets and patterns are in bytes read as latin1 (one character per byte): what a file
   * scrubbed in place masks, keeping its length.
   */
  byteRanges(latin1: string): Range[] {
    const found = this.kinds.size > 0 ? [...this.bytesIndex().ranges(latin1)] : [];
    for (const pattern of this.patterns) {
      for (const match of latin1.matchAll(pattern)) found.push([match.index, match.index + match[0].length]);
    }
    return mergeRanges(found);
  }

  private index(): SecretIndex {
    if (!this.textIndex) {
      this.textIndex = new SecretIndex();
      for (const [value, kind] of this.kinds) {
        for (const form of secretForms(value, kind)) this.textIndex.addForm(form, kind === 'key');
      }
    }
    return this.textIndex;
  }

  private bytesIndex(): SecretIndex {
    if (this.ascii) return this.index();
    if (!this.byteIndex) {
      this.byteIndex = new SecretIndex();
      for (const [value, kind] of this.kinds) {
        for (const form of secretForms(value, kind)) this.byteIndex.addForm(latin1Of(form), kind === 'key');
      }
    }
    return this.byteIndex;
  }
}

const latin1Of = (text: string): string => Buffer.from(text, 'utf8').toString('latin1');
