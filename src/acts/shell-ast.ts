/**
 * The syntax tree the shell parser (shell-lex.ts, shell-parse.ts) produces: pipelines of simple
 * commands and groups, with words kept as parts (literal text, quoted or not, parameter expansions,
 * command substitutions) so the classifier can tell `echo "git push"` (data) from `$(git push)`.
 */

export type Part =
  /** Literal text. `quoted`: it came from quotes or a backslash (no globbing, splitting or brace expansion). */
  | { type: 'lit'; text: string; quoted: boolean }
  /** `$name` / `${…}`. `simple`: just a name, so a known value can stand in for it. */
  | { type: 'param'; name: string; simple: boolean; raw: string; quoted: boolean }
  /** `$(…)`, backticks, `<(…)`, `>(…)`: a script that runs before the command. `raw` may be '' (embedded). */
  | { type: 'sub'; script: Script; raw: string; quoted: boolean }
  /** Text whose value we cannot know: `$((…))`, or a substitution too deep to parse. */
  | { type: 'opaque'; raw: string; quoted: boolean };

export interface Word {
  parts: Part[];
  start: number;
  end: number;
}

export interface Heredoc {
  delimiter: string;
  /** `<<-`: leading tabs stripped. */
  strip: boolean;
  /** A quoted delimiter: the body is literal (no expansions run). */
  quoted: boolean;
  body: string;
  /** Substitutions in an unquoted body: they run. */
  subs: Part[];
}

export interface Redirect {
  op: string;
  /** The fd written before the operator (`2>`), if any. */
  fd: string | undefined;
  target: Word;
  heredoc?: Heredoc;
}

export interface SimpleCommand {
  type: 'simple';
  assigns: Word[];
  words: Word[];
  redirects: Redirect[];
  start: number;
  end: number;
}

export interface Group {
  type: 'group';
  /** `( … )`: runs in a subshell, so `cd` inside does not leak out. */
  subshell: boolean;
  /** Set for a function body (`f() { … }`, `function f { … }`). */
  fn?: string;
  body: Pipeline[];
  redirects: Redirect[];
  start: number;
  end: number;
}

export type Command = SimpleCommand | Group;
export type Pipeline = Command[];

export interface Script {
  /** The text the offsets of its commands refer to. */
  src: string;
  pipelines: Pipeline[];
}

export interface ParseBudget {
  maxDepth: number;
  maxWork: number;
  /** Characters parsed so far, across all parsers sharing the budget. */
  used: number;
  /** Limits that were hit. */
  hit: Set<'depth' | 'work' | 'segments'>;
}

export const newBudget = (maxDepth: number, maxWork: number): ParseBudget => ({
  maxDepth,
  maxWork,
  used: 0,
  hit: new Set(),
});

export function partText(part: Part): string {
  return part.type === 'lit' ? part.text : part.raw;
}

/** The text of a word that is one unquoted literal (a keyword candidate), else undefined. */
export function literal(word: Word | undefined): string | undefined {
  if (word?.parts.length !== 1) return undefined;
  const part = word.parts[0];
  return part?.type === 'lit' && !part.quoted ? part.text : undefined;
}

const SIMPLE_ESCAPES: Record<string, string> = {
  n: '\n',
  t: '\t',
  r: '\r',
  a: '\x07',
  b: '\b',
  e: '\x1b',
  E: '\x1b',
  f: '\f',
  v: '\v',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '?': '?',
};

/** Decodes `$'…'` with `quote` at the opening `'`: the text and the index after the closing `'`. */
export function decodeAnsiC(src: string, quote: number): { text: string; end: number } {
  let out = '';
  let j = quote + 1;
  while (j < src.length) {
    const c = src[j] as string;
    if (c === "'") return { text: out, end: j + 1 };
    if (c !== '\\') {
      out += c;
      j++;
      continue;
    }
    const n = src[j + 1];
    if (n === undefined) {
      out += '\\';
      j++;
      continue;
    }
    const simple = SIMPLE_ESCAPES[n];
    if (simple !== undefined) {
      out += simple;
      j += 2;
      continue;
    }
    const numeric =
      n === 'x'
        ? /^[0-9a-fA-F]{1,2}/.exec(src.slice(j + 2, j + 4))
        : n === 'u'
          ? /^[0-9a-fA-F]{1,4}/.exec(src.slice(j + 2, j + 6))
          : n === 'U'
            ? /^[0-9a-fA-F]{1,8}/.exec(src.slice(j + 2, j + 10))
            : null;
    if (numeric) {
      const code = Number.parseInt(numeric[0], 16);
      out += code <= 0x10ffff ? String.fromCodePoint(code) : '\ufffd';
      j += 2 + numeric[0].length;
      continue;
    }
    const octal = /^[0-7]{1,3}/.exec(src.slice(j + 1, j + 4));
    if (octal) {
      out += String.fromCharCode(Number.parseInt(octal[0], 8) & 0xff);
      j += 1 + octal[0].length;
      continue;
    }
    if (n === 'c' && src[j + 2] !== undefined) {
      out += String.fromCharCode((src.charCodeAt(j + 2) & 0x1f) >>> 0);
      j += 3;
      continue;
    }
    out += `\\${n}`;
    j += 2;
  }
  return { text: out, end: src.length };
}
