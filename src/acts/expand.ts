import type { Word } from './shell-ast.js';
import { fold } from './unicode.js';

/**
 * A word after the expansions we can do without running anything: quote removal, variables whose
 * value is known (assigned literally earlier on the same command line, `$IFS`, `$HOME`, `$PWD`), field
 * splitting of those values, and brace expansion. Anything else (`$X` unknown, `$(…)`, `$((…))`) stays
 * as its source text and marks the argument `dynamic`.
 */
export interface Arg {
  /** The argument as the program would see it (unknown expansions kept as source text). */
  text: string;
  /** `fold(text)`: what it reads as (see unicode.ts). */
  f: string;
  /** Some character came from quotes or a backslash. */
  quoted: boolean;
  /** Contains an expansion whose value is unknown. */
  dynamic: boolean;
  /** Contains an unquoted `*`, `?` or `[` (a pathname pattern). */
  glob: boolean;
  /** How the word was put together when that is itself an evasion. */
  via?: 'variable' | 'ifs' | 'brace-expansion';
}

export type Lookup = (name: string) => string | undefined;

/** Character origin: unquoted literal, quoted literal, unquoted known value (split on IFS), unknown. */
const UNQUOTED = 0;
const QUOTED = 1;
const SPLITTABLE = 2;
const UNKNOWN = 3;

/** Brace expansion is for the short words evasions are made of; long words are left as they are. */
const BRACE_WORD_LIMIT = 256;
const BRACE_GROUPS_LIMIT = 8;
const BRACE_RESULTS_LIMIT = 32;

export function literalArg(text: string): Arg {
  return { text, f: fold(text), quoted: false, dynamic: false, glob: false };
}

export function expandWord(word: Word, lookup: Lookup): Arg[] {
  let text = '';
  const flags: number[] = [];
  let fromVariable = false;
  let ifs = false;
  const add = (value: string, flag: number) => {
    text += value;
    for (let k = 0; k < value.length; k++) flags.push(flag);
  };
  for (const part of word.parts) {
    if (part.type === 'lit') add(part.text, part.quoted ? QUOTED : UNQUOTED);
    else if (part.type === 'param') {
      const value = part.simple ? lookup(part.name) : undefined;
      if (value === undefined) add(part.raw, UNKNOWN);
      else {
        fromVariable = true;
        if (part.name === 'IFS') ifs = true;
        add(value, part.quoted ? QUOTED : SPLITTABLE);
      }
    } else add(part.raw, UNKNOWN);
  }
  // An unquoted variable that expands to nothing is no argument at all.
  if (text === '' && fromVariable && word.parts.every((p) => !p.quoted)) return [];
  const dynamic = flags.includes(UNKNOWN) || word.parts.some((p) => p.type === 'sub' || p.type === 'opaque');
  const expanded = text.length <= BRACE_WORD_LIMIT ? braceExpand(text, flags) : [{ text, flags }];
  const braced = expanded.length > 1;
  const emptyQuote = word.parts.some((p) => p.type === 'lit' && p.quoted && p.text === '');
  const out: Arg[] = [];
  for (const item of expanded) {
    for (const field of splitFields(item.text, item.flags)) {
      const via = braced ? 'brace-expansion' : ifs ? 'ifs' : fromVariable ? 'variable' : undefined;
      out.push({
        text: field.text,
        f: fold(field.text),
        // An empty quote (`g''it`) leaves no character behind but is quoting all the same.
        quoted: field.flags.includes(QUOTED) || (emptyQuote && expanded.length === 1),
        dynamic,
        glob: field.flags.some((flag, k) => flag === UNQUOTED && '*?['.includes(field.text[k] as string)),
        ...(via ? { via } : {}),
      });
    }
  }
  return out;
}

/** Splits on whitespace that came from an unquoted known value; drops empty fields that came from one. */
function splitFields(text: string, flags: number[]): { text: string; flags: number[] }[] {
  if (!flags.includes(SPLITTABLE)) return [{ text, flags }];
  const out: { text: string; flags: number[] }[] = [];
  let current = '';
  let currentFlags: number[] = [];
  let keep = false;
  for (let k = 0; k < text.length; k++) {
    const ch = text[k] as string;
    const flag = flags[k] as number;
    if (flag === SPLITTABLE && (ch === ' ' || ch === '\t' || ch === '\n')) {
      if (current !== '' || keep) out.push({ text: current, flags: currentFlags });
      current = '';
      currentFlags = [];
      keep = false;
      continue;
    }
    current += ch;
    currentFlags.push(flag);
    if (flag !== SPLITTABLE) keep = true;
  }
  if (current !== '' || keep) out.push({ text: current, flags: currentFlags });
  return out;
}

/** Bash brace expansion (`a{b,c}d` → `abd acd`) over unquoted braces, bounded. */
function braceExpand(text: string, flags: number[], groups = 0): { text: string; flags: number[] }[] {
  if (groups >= BRACE_GROUPS_LIMIT || !text.includes('{')) return [{ text, flags }];
  for (let open = 0; open < text.length; open++) {
    if (text[open] !== '{' || flags[open] !== UNQUOTED) continue;
    let depth = 0;
    let close = -1;
    const commas: number[] = [];
    for (let k = open; k < text.length; k++) {
      if (flags[k] !== UNQUOTED) continue;
      const ch = text[k];
      if (ch === '{') depth++;
      else if (ch === '}') {
        depth--;
        if (depth === 0) {
          close = k;
          break;
        }
      } else if (ch === ',' && depth === 1) commas.push(k);
    }
    if (close < 0) return [{ text, flags }];
    if (commas.length === 0) continue;
    const bounds = [open, ...commas, close];
    const out: { text: string; flags: number[] }[] = [];
    for (let b = 0; b + 1 < bounds.length; b++) {
      const from = (bounds[b] as number) + 1;
      const to = bounds[b + 1] as number;
      const nextText = text.slice(0, open) + text.slice(from, to) + text.slice(close + 1);
      const nextFlags = [...flags.slice(0, open), ...flags.slice(from, to), ...flags.slice(close + 1)];
      for (const item of braceExpand(nextText, nextFlags, groups + 1)) {
        if (out.length >= BRACE_RESULTS_LIMIT) return out;
        out.push(item);
      }
    }
    return out;
  }
  return [{ text, flags }];
}
