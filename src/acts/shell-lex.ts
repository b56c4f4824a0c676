import {
  decodeAnsiC,
  type Heredoc,
  type ParseBudget,
  type Part,
  type Pipeline,
  type Script,
  type Word,
} from './shell-ast.js';

/**
 * The lexical half of the shell parser: words and everything inside them (quotes, backslashes,
 * `$'…'`, parameter expansions, command and process substitutions, arithmetic), plus the bounded
 * scans that skip text too deep to parse. The grammar (lists, pipelines, compound commands,
 * redirections, heredocs) is in shell-parse.ts, which extends this class.
 */

/** Where a list ends: end of input, `)`, `}` (a keyword at command start), or a case item's `;;`/`esac`. */
export type Stop = 'eof' | ')' | '}' | 'case';

/** Characters that end an unquoted word. */
export const META = new Set([' ', '\t', '\r', '\n', ';', '&', '|', '<', '>', '(', ')']);
const ARRAY_START = /^[A-Za-z_][A-Za-z0-9_]*\+?=$/;

export abstract class Lexer {
  protected i = 0;
  protected nest = 0;
  /** How many `)` are awaited by enclosing `$(`/`(`: a `)` inside a `{`/case body then ends them. */
  protected parenStops = 0;
  protected pending: Heredoc[] = [];

  protected constructor(
    protected readonly src: string,
    protected readonly depth: number,
    protected readonly budget: ParseBudget,
  ) {}

  abstract parseScript(): Script;
  /** A lexer for text found inside this one, one level deeper (undefined past the budget). */
  protected abstract child(text: string): Lexer | undefined;
  protected abstract parseList(stop: Stop): Pipeline[];

  /** May one more level be opened here? */
  protected deeper(): boolean {
    if (this.depth + this.nest + 1 > this.budget.maxDepth) {
      this.budget.hit.add('depth');
      return false;
    }
    return true;
  }

  protected get c(): string | undefined {
    return this.src[this.i];
  }

  protected at(offset: number): string | undefined {
    return this.src[this.i + offset];
  }

  /** Blanks, line continuations and comments (a `#` here is always at the start of a word). */
  protected skipBlanks(): void {
    for (;;) {
      const c = this.c;
      if (c === ' ' || c === '\t' || c === '\r') this.i++;
      else if (c === '\\' && this.at(1) === '\n') this.i += 2;
      else if (c === '#') {
        const nl = this.src.indexOf('\n', this.i);
        this.i = nl < 0 ? this.src.length : nl;
      } else return;
    }
  }

  protected nested<T>(stop: ')' | '}', fn: () => T): T {
    this.nest++;
    if (stop === ')') this.parenStops++;
    try {
      return fn();
    } finally {
      this.nest--;
      if (stop === ')') this.parenStops--;
    }
  }

  /** The substitutions inside text that is expanded but not parsed as commands. */
  protected subsIn(text: string, honorSingleQuotes = true): Part[] {
    if (!/[$`]/.test(text)) return [];
    return this.child(text)?.scanExpansions(honorSingleQuotes) ?? [];
  }

  scanExpansions(honorSingleQuotes: boolean): Part[] {
    const parts: Part[] = [];
    while (this.i < this.src.length) {
      const c = this.c;
      if (c === '\\') this.i += 2;
      else if (c === "'" && honorSingleQuotes) {
        const end = this.src.indexOf("'", this.i + 1);
        this.i = end < 0 ? this.src.length : end + 1;
      } else if (c === '$') this.parseDollar(parts, true);
      else if (c === '`') this.parseBacktick(parts, true);
      else this.i++;
    }
    return parts.filter((p) => p.type === 'sub');
  }

  protected lexWord(): Word {
    const start = this.i;
    const parts: Part[] = [];
    let text = '';
    const flush = () => {
      if (text !== '') parts.push({ type: 'lit', text, quoted: false });
      text = '';
    };
    for (;;) {
      const c = this.c;
      if (c === undefined) break;
      if (c === '\\') {
        const next = this.at(1);
        if (next === '\n') {
          this.i += 2;
          continue;
        }
        flush();
        parts.push({ type: 'lit', text: next ?? '\\', quoted: true });
        this.i += next === undefined ? 1 : 2;
        continue;
      }
      if (META.has(c)) {
        if ((c === '<' || c === '>') && this.at(1) === '(') {
          flush();
          this.i++;
          this.parseParenSub(parts, false, this.i - 1);
          continue;
        }
        if (c === '(' && parts.length === 0 && ARRAY_START.test(text)) {
          const end = this.skipBalanced(this.i, '(', ')');
          const inner = this.src.slice(this.i + 1, Math.max(this.i + 1, end - 1));
          text += `(${inner})`;
          this.i = end;
          flush();
          parts.push(...this.subsIn(inner));
          continue;
        }
        break;
      }
      if (c === "'") {
        flush();
        const end = this.src.indexOf("'", this.i + 1);
        const stop = end < 0 ? this.src.length : end;
        parts.push({ type: 'lit', text: this.src.slice(this.i + 1, stop), quoted: true });
        this.i = end < 0 ? this.src.length : end + 1;
        continue;
      }
      if (c === '"') {
        flush();
        this.parseDouble(parts);
        continue;
      }
      if (c === '$') {
        flush();
        this.parseDollar(parts, false);
        continue;
      }
      if (c === '`') {
        flush();
        this.parseBacktick(parts, false);
        continue;
      }
      text += c;
      this.i++;
    }
    flush();
    return { parts, start, end: this.i };
  }

  protected parseDouble(parts: Part[]): void {
    const count = parts.length;
    this.i++;
    let text = '';
    const flush = () => {
      if (text !== '') parts.push({ type: 'lit', text, quoted: true });
      text = '';
    };
    for (;;) {
      const c = this.c;
      if (c === undefined) break;
      if (c === '"') {
        this.i++;
        break;
      }
      if (c === '\\') {
        const next = this.at(1);
        if (next === '\n') {
          this.i += 2;
          continue;
        }
        if (next !== undefined && '$`"\\'.includes(next)) {
          text += next;
          this.i += 2;
          continue;
        }
        text += c;
        this.i++;
        continue;
      }
      if (c === '$') {
        flush();
        this.parseDollar(parts, true);
        continue;
      }
      if (c === '`') {
        flush();
        this.parseBacktick(parts, true);
        continue;
      }
      text += c;
      this.i++;
    }
    flush();
    if (parts.length === count) parts.push({ type: 'lit', text: '', quoted: true });
  }

  protected parseDollar(parts: Part[], quoted: boolean): void {
    const start = this.i;
    const next = this.at(1);
    if (next === "'" && !quoted) {
      const { text, end } = decodeAnsiC(this.src, this.i + 1);
      parts.push({ type: 'lit', text, quoted: true });
      this.i = end;
      return;
    }
    if (next === '"' && !quoted) {
      this.i++;
      this.parseDouble(parts);
      return;
    }
    if (next === '(') {
      if (this.at(2) === '(') {
        const end = this.arithEnd(this.i + 1);
        if (end >= 0) {
          const inner = this.src.slice(this.i + 3, end - 2);
          this.i = end;
          parts.push({ type: 'opaque', raw: this.src.slice(start, end), quoted });
          parts.push(...this.subsIn(inner));
          return;
        }
      }
      this.i++;
      this.parseParenSub(parts, quoted, start);
      return;
    }
    if (next === '{') {
      this.parseBraceParam(parts, quoted, start);
      return;
    }
    if (next !== undefined && /[A-Za-z_]/.test(next)) {
      let j = this.i + 2;
      while (this.src[j] !== undefined && /[A-Za-z0-9_]/.test(this.src[j] as string)) j++;
      this.i = j;
      parts.push({
        type: 'param',
        name: this.src.slice(start + 1, j),
        simple: true,
        raw: this.src.slice(start, j),
        quoted,
      });
      return;
    }
    if (next !== undefined && /[0-9@*#?$!-]/.test(next)) {
      this.i += 2;
      parts.push({ type: 'param', name: next, simple: true, raw: this.src.slice(start, this.i), quoted });
      return;
    }
    this.i++;
    parts.push({ type: 'lit', text: '$', quoted });
  }

  /** At the `(` of `$(`, `<(` or `>(`: parses the script up to the matching `)`. */
  protected parseParenSub(parts: Part[], quoted: boolean, start: number): void {
    if (!this.deeper()) {
      this.i = this.skipBalanced(this.i, '(', ')');
      parts.push({ type: 'opaque', raw: this.src.slice(start, this.i), quoted });
      return;
    }
    this.i++;
    const pipelines = this.nested(')', () => this.parseList(')'));
    if (this.c === ')') this.i++;
    parts.push({
      type: 'sub',
      script: { src: this.src, pipelines },
      raw: this.src.slice(start, this.i),
      quoted,
    });
  }

  protected parseBraceParam(parts: Part[], quoted: boolean, start: number): void {
    if (!this.deeper()) {
      this.i = this.skipBalanced(this.i + 1, '{', '}');
      parts.push({ type: 'opaque', raw: this.src.slice(start, this.i), quoted });
      return;
    }
    this.i += 2;
    const contentStart = this.i;
    const inner: Part[] = [];
    this.nest++;
    let depth = 1;
    while (this.i < this.src.length) {
      const c = this.c;
      if (c === '\\') this.i += 2;
      else if (c === '}') {
        depth--;
        if (depth === 0) break;
        this.i++;
      } else if (c === '{') {
        depth++;
        this.i++;
      } else if (c === "'" && !quoted) {
        const end = this.src.indexOf("'", this.i + 1);
        this.i = end < 0 ? this.src.length : end + 1;
      } else if (c === '"') this.parseDouble(inner);
      else if (c === '$') this.parseDollar(inner, true);
      else if (c === '`') this.parseBacktick(inner, true);
      else this.i++;
    }
    this.nest--;
    const content = this.src.slice(contentStart, Math.min(this.i, this.src.length));
    if (this.c === '}') this.i++;
    const name = /^[#!]?([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])/.exec(content)?.[1] ?? '';
    const simple = /^([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-])$/.test(content);
    parts.push({ type: 'param', name, simple, raw: this.src.slice(start, this.i), quoted });
    for (const part of inner) if (part.type === 'sub') parts.push({ ...part, raw: '' });
  }

  protected parseBacktick(parts: Part[], quoted: boolean): void {
    const start = this.i;
    this.i++;
    let text = '';
    while (this.i < this.src.length) {
      const c = this.c as string;
      if (c === '`') break;
      const next = this.at(1);
      if (
        c === '\\' &&
        next !== undefined &&
        (next === '`' || next === '\\' || next === '$' || (quoted && next === '"'))
      ) {
        text += next;
        this.i += 2;
        continue;
      }
      text += c;
      this.i++;
    }
    if (this.c === '`') this.i++;
    const raw = this.src.slice(start, this.i);
    const script = this.child(text)?.parseScript();
    parts.push(script ? { type: 'sub', script, raw, quoted } : { type: 'opaque', raw, quoted });
  }

  /** With `pos` at the first `(` of `((`: the index after the closing `))`, or -1 if it does not close so. */
  protected arithEnd(pos: number): number {
    let depth = 0;
    for (let j = pos + 2; j < this.src.length; j++) {
      const c = this.src[j];
      if (c === '(') depth++;
      else if (c === ')') {
        if (depth === 0) return this.src[j + 1] === ')' ? j + 2 : -1;
        depth--;
      }
    }
    return -1;
  }

  /** With `pos` at an opening bracket: the index after its match (quotes skipped), or the end. */
  protected skipBalanced(pos: number, open: string, close: string): number {
    let depth = 0;
    for (let j = pos; j < this.src.length; j++) {
      const c = this.src[j];
      if (c === '\\') j++;
      else if (c === "'" || c === '"') {
        let k = j + 1;
        while (k < this.src.length && this.src[k] !== c) k += c === '"' && this.src[k] === '\\' ? 2 : 1;
        j = k;
      } else if (c === open) depth++;
      else if (c === close) {
        depth--;
        if (depth <= 0) return j + 1;
      }
    }
    return this.src.length;
  }
}
