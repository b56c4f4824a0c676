/**
 * The one exception class for unexpected failures. Expected failures (a launch that failed, a turn
 * that failed, a rejected event) are values; this is thrown only for what a caller cannot go on from,
 * and is caught at the edges (CLI entry, HTTP handler, dispatcher loop).
 */
export type LoopErrorCode =
  | 'config-invalid'
  | 'config-missing'
  | 'config-exists'
  | 'env-missing'
  | 'work-item-invalid'
  | 'engine-unknown'
  | 'engine-unsupported'
  | 'binary-missing'
  | 'cwd-missing'
  | 'session-missing'
  | 'session-busy'
  | 'session-closed'
  | 'slug-collision'
  | 'delivery-pruned'
  | 'store-failed'
  /** A host wrote for a work item whose lease it no longer holds (PostgreSQL, several hosts): nothing was written. */
  | 'fenced'
  | 'usage'
  | 'internal';

export class LoopError extends Error {
  readonly code: LoopErrorCode;
  /** What the person should do next, printed under the message. */
  readonly hint: string | undefined;

  constructor(code: LoopErrorCode, message: string, options?: { cause?: unknown; hint?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'LoopError';
    this.code = code;
    this.hint = options?.hint;
  }
}

export const isLoopError = (error: unknown): error is LoopError => error instanceof LoopError;

/** A short, single-line description of any thrown value. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}
