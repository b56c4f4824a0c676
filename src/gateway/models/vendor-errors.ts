import type { IncomingHttpHeaders } from 'node:http';
import type { ModelApi } from '../types.js';

/**
 * The gateway's own answers to a model request, in the JSON error shape of the vendor the engine
 * speaks, so its CLI shows our message instead of "unexpected response". Pure.
 *
 * The budget refusal must be shown and not retried; what each CLI does was checked with the real
 * CLIs on this machine (see test/gateway/model-proxy-cli.test.ts):
 * - Claude Code (Anthropic SDK): 403 is not retried; `x-should-retry: false` says so explicitly
 *   (the SDK obeys that header before looking at the status). Shown as `API Error: 403 {…}`.
 * - Codex 0.171.0: 403 (and 401, 402) is an "unexpected status" it retries 5 times; 429 with type
 *   `insufficient_quota` is not retried but is shown as its own "Quota exceeded. Check your plan
 *   and billing details." (our message lost); 400 is an invalid request: not retried, body shown.
 *   Hence 400 with OpenAI's quota type and code.
 * - Gemini CLI 0.61.0: retries 429 and 5xx only; 403 `PERMISSION_DENIED` fails at once.
 * A request the allow-list refuses (`not-allowed`) must not be retried either, so the same statuses:
 * Codex retries a 404 as it does a 403 (6 requests), and Claude Code sends its request again after
 * a 404 (a model fallback), where 400 and 403 are shown at once.
 */

export type RefusalKind =
  | 'budget'
  | 'not-allowed'
  | 'not-found'
  | 'too-large'
  | 'bad-gateway'
  | 'timeout'
  /** The gateway's body budget is full (web/limits.ts): retried after `Retry-After`. */
  | 'busy';

export interface VendorError {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const STATUS: Record<RefusalKind, Record<ModelApi, number>> = {
  budget: { anthropic: 403, openai: 400, gemini: 403 },
  'not-allowed': { anthropic: 403, openai: 400, gemini: 403 },
  'not-found': { anthropic: 404, openai: 404, gemini: 404 },
  'too-large': { anthropic: 413, openai: 413, gemini: 413 },
  'bad-gateway': { anthropic: 502, openai: 502, gemini: 502 },
  timeout: { anthropic: 504, openai: 504, gemini: 504 },
  busy: { anthropic: 503, openai: 503, gemini: 503 },
};

/** Anthropic's `error.type` values (https://docs.anthropic.com/en/api/errors). */
const ANTHROPIC_TYPE: Record<RefusalKind, string> = {
  budget: 'permission_error',
  'not-allowed': 'permission_error',
  'not-found': 'not_found_error',
  'too-large': 'request_too_large',
  'bad-gateway': 'api_error',
  timeout: 'api_error',
  busy: 'overloaded_error',
};

/** OpenAI's `error.type` / `error.code` (https://platform.openai.com/docs/guides/error-codes). */
const OPENAI_TYPE: Record<RefusalKind, [string, string | null]> = {
  budget: ['insufficient_quota', 'insufficient_quota'],
  'not-allowed': ['invalid_request_error', 'not_allowed'],
  'not-found': ['invalid_request_error', 'not_found'],
  'too-large': ['invalid_request_error', 'request_too_large'],
  'bad-gateway': ['server_error', null],
  timeout: ['server_error', 'timeout'],
  busy: ['server_error', 'server_overloaded'],
};

/** Google's canonical status names (https://cloud.google.com/apis/design/errors). */
const GEMINI_STATUS: Record<RefusalKind, string> = {
  budget: 'PERMISSION_DENIED',
  'not-allowed': 'PERMISSION_DENIED',
  'not-found': 'NOT_FOUND',
  'too-large': 'INVALID_ARGUMENT',
  'bad-gateway': 'UNAVAILABLE',
  timeout: 'DEADLINE_EXCEEDED',
  busy: 'UNAVAILABLE',
};

function bodyOf(api: ModelApi, kind: RefusalKind, status: number, message: string): unknown {
  switch (api) {
    case 'anthropic':
      return { type: 'error', error: { type: ANTHROPIC_TYPE[kind], message } };
    case 'openai': {
      const [type, code] = OPENAI_TYPE[kind];
      return { error: { message, type, param: null, code } };
    }
    case 'gemini':
      return { error: { code: status, message, status: GEMINI_STATUS[kind] } };
  }
}

export function vendorError(api: ModelApi, kind: RefusalKind, message: string): VendorError {
  const status = STATUS[kind][api];
  const body = `${JSON.stringify(bodyOf(api, kind, status, message))}\n`;
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(body)),
  };
  // Upstream trouble and a full gateway may pass; our refusals will not: tell the Anthropic SDK
  // which to retry. A full gateway also says when (every CLI's SDK reads Retry-After).
  const passing = kind === 'bad-gateway' || kind === 'timeout' || kind === 'busy';
  if (api === 'anthropic') headers['x-should-retry'] = passing ? 'true' : 'false';
  if (kind === 'busy') headers['retry-after'] = '5';
  return { status, headers, body };
}

/**
 * The API a request speaks, from its shape, for answering before a route is known: Gemini's paths
 * and key header, Anthropic's key header or `anthropic-version`, else OpenAI.
 */
export function guessApi(path: string, headers: IncomingHttpHeaders): ModelApi {
  if (headers['x-goog-api-key'] !== undefined || /^\/v1(beta|alpha)?\/models\/[^/]+:/.test(path)) {
    return 'gemini';
  }
  if (headers['x-api-key'] !== undefined || headers['anthropic-version'] !== undefined) return 'anthropic';
  return 'openai';
}
