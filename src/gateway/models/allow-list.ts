import type { ModelApi } from '../types.js';

/**
 * What an engine may ask of its model API through the gateway: default deny. Pure.
 *
 * Only requests whose answer carries its own usage (or that cost nothing) pass: a model turn,
 * a token count, a model list. Everything else under a vendor's API — Anthropic Message Batches,
 * OpenAI batches, fine-tuning, images, files, Gemini `batchGenerateContent`, tuning, caches — would
 * pass the budget check (nothing spent yet) and queue work whose bill never comes back on this
 * connection: unmetered, unbounded. So each API has an allow-list of method + path, matched on the
 * path the engine appended to its base URL (normalized: dot segments resolved, percent-encoding
 * kept, the query ignored). It lists exactly what the CLIs send, read from their bundles and
 * checked with the real CLIs against the mocks (test/gateway/model-proxy-cli.test.ts).
 */

/** A further check on the request body before it may pass (the Responses API's `background`). */
export type BodyCheck = 'responses';

export type Verdict = { allowed: true; check?: BodyCheck } | { allowed: false };

interface Rule {
  method: 'GET' | 'POST';
  path: RegExp;
  check?: BodyCheck;
}

/** A model id as one path segment (`claude-sonnet-4-5-20250929`, `gemini-2.5-pro`): no `/`, `:`, `%`, no dot segment. */
const ID = '[A-Za-z0-9][A-Za-z0-9._-]*';

const RULES: Record<ModelApi, readonly Rule[]> = {
  // Claude Code 2.1.197 sends `POST /v1/messages?beta=true` (streamed turns, and titles, topic
  // checks and other side requests unstreamed), `POST /v1/messages/count_tokens?beta=true` (its
  // token counter, `beta.messages.countTokens`), and `GET /v1/models` (`models.list`, model
  // discovery, `?limit=1000`); the SDK's `models.retrieve` is `GET /v1/models/{id}`. Its
  // reachability `HEAD` on the bare base is answered by the gateway itself (`isReachabilityCheck`).
  anthropic: [
    { method: 'POST', path: /^\/v1\/messages$/ },
    { method: 'POST', path: /^\/v1\/messages\/count_tokens$/ },
    { method: 'GET', path: /^\/v1\/models$/ },
    { method: 'GET', path: new RegExp(`^/v1/models/${ID}$`) },
    { method: 'GET', path: /^\/?$/ },
  ],
  // Codex 0.171.0 (a `wire_api = "responses"` provider whose base_url is the gateway) appends
  // `/responses` to it — turns, and its own context compaction, which for a custom provider is a
  // plain Responses request too — and `/models` for its model list. The upstream base holds the
  // `/v1` (https://api.openai.com/v1); an engine whose base does not end in /v1 sends `/v1/…`.
  openai: [
    { method: 'POST', path: /^(\/v1)?\/responses$/, check: 'responses' },
    { method: 'GET', path: /^(\/v1)?\/models$/ },
  ],
  // Gemini CLI 0.61.0 with an API key (@google/genai): `POST /v1beta/models/{model}:generateContent`
  // (the router's classifier and other side calls), `:streamGenerateContent?alt=sse` (turns),
  // `:countTokens` (media in a request, token calibration). `GOOGLE_GENAI_API_VERSION` switches
  // `v1beta` to `v1` or `v1alpha`. It never lists models, but a list costs nothing. Its Code Assist
  // paths (`/v1internal:…`) come only with a Google login, which the gateway does not serve.
  gemini: [
    {
      method: 'POST',
      path: new RegExp(`^/v1(beta|alpha)?/models/${ID}:(generateContent|streamGenerateContent|countTokens)$`),
    },
    { method: 'GET', path: new RegExp(`^/v1(beta|alpha)?/models(/${ID})?$`) },
  ],
};

/** `path`: the pathname the engine appended to its base URL, without the query. */
export function allowedRequest(api: ModelApi, method: string | undefined, path: string): Verdict {
  const rule = RULES[api].find((r) => r.method === method && r.path.test(path));
  if (!rule) return { allowed: false };
  return rule.check ? { allowed: true, check: rule.check } : { allowed: true };
}

/** Claude Code's `HEAD <base>` before its first request: answered by the gateway, never forwarded. */
export function isReachabilityCheck(method: string | undefined, path: string): boolean {
  return method === 'HEAD' && /^\/?(\?.*)?$/.test(path);
}

/**
 * Why a body the check applies to may not pass, or undefined when it may. A Responses request
 * with `"background": true` is answered at once with an id and run later: its usage only comes
 * back to a later `GET /responses/{id}` (not allowed either), never on this connection. Anything
 * but `false`/`null`/absent is refused (the upstream's validation is not ours to guess), as is a
 * body we cannot read: compressed, or not a JSON object.
 */
export function refusedBody(
  check: BodyCheck,
  body: Buffer,
  contentEncoding: string | undefined,
): string | undefined {
  switch (check) {
    case 'responses': {
      if ((contentEncoding ?? 'identity').trim().toLowerCase() !== 'identity')
        return `a ${contentEncoding}-encoded body cannot be checked`;
      let parsed: unknown;
      try {
        parsed = JSON.parse(body.toString('utf8'));
      } catch {
        return 'its body is not JSON';
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        return 'its body is not a JSON object';
      const background = (parsed as Record<string, unknown>).background;
      if (background !== undefined && background !== null && background !== false)
        return 'a background response is run later, and its usage never comes back to be metered';
      return undefined;
    }
  }
}

const MAX_SHOWN = 200;

/** The path as shown and logged: the token (if the engine put it there) redacted, bounded. */
export function shownPath(path: string, token: string): string {
  const redacted = token === '' ? path : path.split(token).join('<token>');
  return redacted.length > MAX_SHOWN ? `${redacted.slice(0, MAX_SHOWN)}…` : redacted;
}

/** The refusal's message, the same for every vendor shape. */
export function notAllowedMessage(method: string | undefined, path: string, why?: string): string {
  const reason = why ?? 'only model requests, token counts and model lists pass';
  return `[the-loop gateway] ${method ?? 'GET'} ${path || '/'} is not allowed through the gateway: ${reason}`;
}
