import { expect } from 'vitest';
import { LoopError } from '../../src/core/errors.js';

/** Run `fn`, expect it to throw a LoopError, and return it (for asserting its code and message). */
export function thrown(fn: () => unknown): LoopError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(LoopError);
    return error as LoopError;
  }
  throw new Error('expected a throw');
}

/** `thrown` for an asynchronous call: await it, expect it to reject with a LoopError, and return it. */
export async function rejected(fn: () => Promise<unknown>): Promise<LoopError> {
  try {
    await fn();
  } catch (error) {
    expect(error).toBeInstanceOf(LoopError);
    return error as LoopError;
  }
  throw new Error('expected a rejection');
}

/** Small seeded PRNG (mulberry32): random test inputs that a failing seed can replay. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
