import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The acceptance criterion's length: a truncated key of 12 or more characters must not survive. */
const RUN = 12;

/**
 * The base64 characters that encode `bytes` at `offset` (0–2) bytes past a 3-byte boundary whatever
 * surrounds them: those equal in two encodings with opposite neighbours (all zero bits, all one bits).
 */
function stableBase64(bytes: Buffer, offset: number): string {
  const around = (fill: number) =>
    Buffer.concat([Buffer.alloc(offset, fill), bytes, Buffer.alloc(3, fill)]).toString('base64');
  const [zeros, ones] = [around(0x00), around(0xff)];
  let stable = '';
  for (let i = 0; i < zeros.length; i++) if (zeros[i] === ones[i] && zeros[i] !== '=') stable += zeros[i];
  return stable;
}

/**
 * What "the canary appears nowhere" is checked against: the canary whole, every run of 12 of its
 * characters (a truncated quote), every run of 12 of it reversed, and every run of 12 of its base64
 * (standard and url-safe, at the three alignments it can have inside a longer base64 stream).
 */
export function canaryNeedles(canary: string): Array<{ form: string; needle: string }> {
  const runs = (form: string, text: string) =>
    Array.from({ length: Math.max(0, text.length - RUN + 1) }, (_, i) => ({
      form,
      needle: text.slice(i, i + RUN),
    }));
  const base64 = [0, 1, 2].flatMap((offset) => {
    const inner = stableBase64(Buffer.from(canary), offset);
    return [inner, inner.replaceAll('+', '-').replaceAll('/', '_')];
  });
  const reversed = Array.from(canary).reverse().join('');
  return [
    { form: 'whole', needle: canary },
    ...runs('run of 12', canary),
    ...runs('reversed', reversed),
    ...base64.flatMap((b) => runs('base64', b)),
  ];
}

/** The forms of the canary found in `data` (bytes or text), each named once. */
export function canaryFormsIn(data: Buffer | string, canary: string): string[] {
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  const found = new Set<string>();
  for (const { form, needle } of canaryNeedles(canary)) if (bytes.includes(needle)) found.add(form);
  return [...found];
}

/** Every regular file under `dir` (symlinks not followed). */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    const st = lstatSync(path);
    if (st.isDirectory()) out.push(...filesUnder(path));
    else if (st.isFile()) out.push(path);
  }
  return out;
}

/** Each file under `dir` that holds a form of the canary, with the forms it holds (binary-safe). */
export function canaryLeaksUnder(dir: string, canary: string): Array<{ file: string; forms: string[] }> {
  return filesUnder(dir)
    .map((file) => ({ file, forms: canaryFormsIn(readFileSync(file), canary) }))
    .filter((leak) => leak.forms.length > 0);
}
