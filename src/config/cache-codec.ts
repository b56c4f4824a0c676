import { isDeepStrictEqual } from 'node:util';

/**
 * The validated-config cache's entries as JSON text. JSON, not `v8.serialize`: loading `node:v8`
 * loads Node's heap utilities and `stream` with it — ~6 ms of every command that reads a cached
 * config. A validated config holds only what JSON holds, but for optional settings the schema left
 * `undefined`: their paths are listed in the text and put back. A value JSON cannot carry as it is
 * (a Date, a Map, a non-finite number, a prototype-shaped key) makes `encodeEntry` return null:
 * that config is validated at each command, never cached wrong.
 */

type Key = string | number;

/** Keys a path may not name: setting them would reach a prototype, not an own property. */
const UNSAFE_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

function undefinedPaths(value: unknown, path: Key[], found: Key[][]): void {
  if (!value || typeof value !== 'object') return;
  const entries: Array<[Key, unknown]> = Array.isArray(value)
    ? value.map((v, i) => [i, v])
    : Object.entries(value);
  for (const [key, child] of entries) {
    if (child === undefined) found.push([...path, key]);
    else undefinedPaths(child, [...path, key], found);
  }
}

function isPath(path: unknown): path is Key[] {
  return (
    Array.isArray(path) &&
    path.length > 0 &&
    path.every((k) => (typeof k === 'string' && !UNSAFE_KEYS.has(k)) || Number.isInteger(k))
  );
}

/** Puts `undefined` back at `path` when its parent is there (an own property of plain data). */
function restore(root: unknown, path: Key[]): void {
  let node = root;
  for (const key of path.slice(0, -1)) {
    if (!node || typeof node !== 'object' || !Object.hasOwn(node, key)) return;
    node = (node as Record<Key, unknown>)[key];
  }
  if (node && typeof node === 'object') (node as Record<Key, unknown>)[path.at(-1) as Key] = undefined;
}

/** The entry as it was encoded, `undefined`s put back; throws on text that is not an entry's. */
export function decodeEntry(bytes: Buffer | string): unknown {
  const parsed = JSON.parse(typeof bytes === 'string' ? bytes : bytes.toString('utf8')) as unknown;
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an entry');
  const { undefinedAt, ...entry } = parsed as { undefinedAt?: unknown };
  if (!Array.isArray(undefinedAt) || !undefinedAt.every(isPath)) throw new Error('not an entry');
  for (const path of undefinedAt) restore(entry, path);
  return entry;
}

/** The entry's bytes, or null when JSON would not give back exactly this entry. */
export function encodeEntry(entry: object): Buffer | null {
  const undefinedAt: Key[][] = [];
  undefinedPaths(entry, [], undefinedAt);
  if (undefinedAt.some((path) => !isPath(path)) || Object.hasOwn(entry, 'undefinedAt')) return null;
  let text: string;
  try {
    text = JSON.stringify({ ...entry, undefinedAt });
  } catch {
    return null;
  }
  return isDeepStrictEqual(decodeEntry(text), entry) ? Buffer.from(text, 'utf8') : null;
}
