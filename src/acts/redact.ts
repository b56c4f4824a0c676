import type { ActDetail } from './types.js';

/**
 * Best-effort masking of credentials that agents put on command lines (`curl -H "Authorization:
 * token ghp_…"`, `https://user:token@github.com/…`, `NPM_TOKEN=… npm publish`), so that an act's
 * `command` and `detail` can be stored and shown. It only knows common shapes; the places that store
 * acts still scrub the configured secret values (SecretScrubber), which this does not replace.
 */

const MASK = '***';

const RULES: [RegExp, string][] = [
  // Well-known token formats: GitHub, GitLab, npm, Slack, OpenAI/Anthropic-style keys, AWS key ids.
  [
    /\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,}|npm_[A-Za-z0-9]{30,}|xox[abpr]-[A-Za-z0-9-]{10,}|sk-[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16})\b/g,
    MASK,
  ],
  // Authorization / token headers.
  [
    /((?:authorization|x-api-key|private-token)\s*:\s*(?:token\s+|bearer\s+|basic\s+)?)[^\s'"]+/gi,
    `$1${MASK}`,
  ],
  // Credentials in URLs.
  [/(\b[a-z][a-z0-9+.-]*:\/\/[^\s:@/'"]+:)[^\s@/'"]+@/gi, `$1${MASK}@`],
  // NAME=value where the name says it is a secret.
  [/(\b[A-Za-z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|APIKEY)[A-Za-z0-9_]*=)[^\s'"]+/gi, `$1${MASK}`],
  // Options named for secrets: --token X, --password=X, --otp X.
  [/(--(?:token|password|api-key|apikey|otp|pat|auth-token)(?:=|\s+))[^\s'"]+/gi, `$1${MASK}`],
  // curl -u user:password
  [/(\s-u\s+[^\s:'"]+:)[^\s'"]+/g, `$1${MASK}`],
];

export function redact(text: string): string {
  let out = text;
  for (const [pattern, replacement] of RULES) out = out.replace(pattern, replacement);
  return out;
}

/** The detail with every string (and string in an array) redacted. */
export function redactDetail(detail: ActDetail): ActDetail {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(detail)) {
    if (typeof value === 'string') out[key] = redact(value);
    else if (Array.isArray(value)) out[key] = value.map((v) => (typeof v === 'string' ? redact(v) : v));
    else out[key] = value;
  }
  return out as ActDetail;
}
