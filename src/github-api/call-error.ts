import { GitHubCallError } from '../core/ports/github.js';

/** The shape of Octokit's RequestError that matters here (read structurally: no class checks across copies). */
interface RequestErrorLike {
  status: number;
  message: string;
  request?: { method?: string; url?: string };
  response?: { headers?: Record<string, string | undefined> };
}

/** GitHub's signs of a rate limit (primary or secondary) on a 403 or 429. */
function rateLimited(error: RequestErrorLike): boolean {
  if (error.status === 429) return true;
  if (error.status !== 403) return false;
  const headers = error.response?.headers ?? {};
  return (
    headers['retry-after'] !== undefined ||
    headers['x-ratelimit-remaining'] === '0' ||
    /rate limit/i.test(error.message)
  );
}

function isRequestError(error: unknown): error is RequestErrorLike {
  if (!(error instanceof Error)) return false;
  const { status, request } = error as { status?: unknown; request?: unknown };
  return typeof status === 'number' && status > 0 && typeof request === 'object' && request !== null;
}

/** `/repos/o/r/issues/comments/5` of a request's URL: no host, no query (a query may carry a secret). */
export function requestPath(url: string | undefined): string {
  if (!url) return '?';
  try {
    return new URL(url, 'http://github.invalid').pathname;
  } catch {
    return '?';
  }
}

/** Whatever names a credential in text GitHub or a library wrote: never part of a message we keep. */
export function withoutSecrets(text: string): string {
  return text
    .replace(/\b(?:gh[pousr]_|github_pat_)[A-Za-z0-9_]{10,}/g, '[token]')
    .replace(/\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g, '[jwt]')
    .replace(/-----BEGIN[^-]*-----[\s\S]*?(?:-----END[^-]*-----|$)/g, '[key]')
    .replace(/\b(?:bearer|token)\s+[^\s,;]{8,}/gi, '[credential]');
}

/**
 * A failure of a call to GitHub, as the port's GitHubCallError: "GitHub answered 404 on PATCH
 * /repos/o/r/issues/comments/5: Not Found", or "GitHub could not be reached on …". The original error
 * is not kept as the cause: Octokit's carries the request's headers and body.
 */
export function toCallError(error: unknown, fallback: { method: string; path: string }): GitHubCallError {
  if (error instanceof GitHubCallError) return error;
  if (isRequestError(error)) {
    const method = (error.request?.method ?? fallback.method).toUpperCase();
    const path = error.request?.url ? requestPath(error.request.url) : fallback.path;
    const said = withoutSecrets(error.message.split('\n')[0] ?? '').slice(0, 300);
    return new GitHubCallError(
      `GitHub answered ${error.status} on ${method} ${path}: ${said}`,
      error.status,
      {
        rateLimited: rateLimited(error),
      },
    );
  }
  const why = withoutSecrets(error instanceof Error ? error.message : String(error)).slice(0, 300);
  return new GitHubCallError(
    `GitHub could not be reached on ${fallback.method} ${fallback.path}: ${why}`,
    undefined,
  );
}
