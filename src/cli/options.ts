import { LoopError } from '../core/errors.js';

/** Commander parser for a whole-number option within bounds, with a clear usage error. */
export const intOption = (name: string, min: number, max: number) => (value: string) => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new LoopError(
      'usage',
      `${name} takes a whole number from ${min} to ${max}, not ${JSON.stringify(value)}`,
    );
  }
  return n;
};
