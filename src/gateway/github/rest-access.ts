import { isSessionRepo, type SessionRepo } from './wire-act.js';

/**
 * Which REST requests the gateway forwards at all, apart from the acts the policy judges. Default
 * deny: the real token can do far more than an agent needs (add a deploy key and push past the git
 * gateway, invite a collaborator, make the repository public, read every other repository), so
 * only what issue and pull request work in the session's own repository needs passes. Pure.
 *
 * Paths are matched exactly as written (lower-case route words, numbers where GitHub has ids): an
 * allow-list must not be widened by the lenient reading (`Pulls`, `merge.json`) that `rest-acts.ts`
 * uses to find acts.
 */

/** Writes (any method but GET and HEAD) under `/repos/{own}/`: `:n` is a number, `*` any one segment. */
const WRITES: Readonly<Record<string, readonly string[]>> = {
  // Issues: create and edit (title, body, state, labels, assignees, milestone), comments, reactions.
  issues: ['POST'],
  'issues/:n': ['PATCH'],
  'issues/:n/comments': ['POST'],
  'issues/comments/:n': ['PATCH'],
  'issues/:n/labels': ['POST', 'PUT', 'DELETE'],
  'issues/:n/labels/*': ['DELETE'],
  'issues/:n/assignees': ['POST', 'DELETE'],
  'issues/:n/reactions': ['POST'],
  'issues/:n/reactions/:n': ['DELETE'],
  'issues/comments/:n/reactions': ['POST'],
  'issues/comments/:n/reactions/:n': ['DELETE'],
  // Pull requests: create and edit, reviews and review comments, reviewers, bringing the head up to
  // date with its base (a merge into the agent's own branch). Merging is an act (`rest-acts.ts`).
  pulls: ['POST'],
  'pulls/:n': ['PATCH'],
  'pulls/:n/reviews': ['POST'],
  'pulls/:n/reviews/:n': ['PUT', 'DELETE'],
  'pulls/:n/reviews/:n/events': ['POST'],
  'pulls/:n/comments': ['POST'],
  'pulls/:n/comments/:n/replies': ['POST'],
  'pulls/comments/:n': ['PATCH'],
  'pulls/comments/:n/reactions': ['POST'],
  'pulls/comments/:n/reactions/:n': ['DELETE'],
  'pulls/:n/requested_reviewers': ['POST', 'DELETE'],
  'pulls/:n/update-branch': ['PUT'],
  // Git objects, unreachable until a ref names them (ref writes are acts).
  'git/blobs': ['POST'],
  'git/trees': ['POST'],
  'git/commits': ['POST'],
  // Computes release notes; writes nothing (what `gh release create --generate-notes` asks).
  'releases/generate-notes': ['POST'],
};

/**
 * Routes refused even though `rest-acts.ts` finds an act in them: a transfer hands the repository
 * to someone else, which no policy rule should be able to allow through an agent.
 */
const NEVER = new Set(['transfer']);

const matches = (pattern: string, rest: readonly string[]): boolean => {
  const parts = pattern.split('/');
  if (parts.length !== rest.length) return false;
  return parts.every((p, i) => {
    const seg = rest[i] as string;
    if (p === ':n') return /^\d{1,20}$/.test(seg);
    if (p === '*') return seg !== '';
    return p === seg;
  });
};

/** Whether a write under `/repos/{own}/` (`rest` follows the repository) is on the allow-list. */
export function restWriteAllowed(method: string, rest: readonly string[]): boolean {
  for (const [pattern, methods] of Object.entries(WRITES)) {
    if (methods.includes(method) && matches(pattern, rest)) return true;
  }
  return false;
}

/** Whether a write under `/repos/{own}/` is refused even as an act. */
export const restWriteNever = (rest: readonly string[]): boolean =>
  rest.length > 0 && NEVER.has((rest[0] as string).toLowerCase());

/**
 * Reads outside `/repos/{own}/` that gh 2.23 makes for issue and pull request work: the API root
 * (`gh auth status` reads the token's scopes from its headers), `/user` (who the token is), the
 * rate limit, and `/meta`. Nothing below `/user` (keys, emails, repositories, organizations).
 */
const OTHER_READS = new Set(['', 'user', 'rate_limit', 'meta']);

/** Search kinds whose `q` can be bound to one repository with a `repo:` qualifier. */
const SEARCHES = new Set(['issues', 'commits', 'code', 'repositories']);

/**
 * Why a read outside `/repos/` is refused; undefined: it passes. `segments` is the whole path's
 * (percent-decoded); `query` its query string.
 */
export function otherReadRefusal(
  segments: readonly string[],
  query: URLSearchParams,
  session: SessionRepo,
): string | undefined {
  const [top = '', kind] = segments;
  if (segments.length === 1 && OTHER_READS.has(top)) return undefined;
  if (top === 'search' && segments.length === 2 && SEARCHES.has(kind as string)) {
    const qs = query.getAll('q');
    if (qs.length === 0) return 'a search needs q with a repo: qualifier';
    for (const q of qs) {
      const why = searchRefusal(q, session);
      if (why) return why;
    }
    return undefined;
  }
  return 'not allowed through the gateway';
}

/** The words of a search query, split on spaces outside double quotes; undefined: a quote is open. */
function searchTerms(q: string): string[] | undefined {
  const terms: string[] = [];
  let current = '';
  let quoted = false;
  for (const ch of q) {
    if (ch === '"') quoted = !quoted;
    if (!quoted && /\s/.test(ch)) {
      if (current !== '') terms.push(current);
      current = '';
    } else current += ch;
  }
  if (quoted) return undefined;
  if (current !== '') terms.push(current);
  return terms;
}

/** Qualifiers that name where a search looks; GitHub ORs several of one kind. */
const SCOPE_QUALIFIER = /^(repo|org|user|owner):(.*)$/i;

/**
 * Why a search query could reach beyond the session's repository; undefined: it cannot. Terms are
 * ANDed, so one `repo:` naming the session's repository bounds the search, as long as nothing can
 * widen it again: every positive `repo:` (GitHub ORs them), `org:`, `user:` and `owner:` must name
 * the session's repository or owner, and `OR`, `NOT` and parentheses are refused. A negated
 * qualifier (`-repo:x`) only narrows. Pure; shared with GraphQL's `search(query:)`.
 */
export function searchRefusal(q: string, session: SessionRepo): string | undefined {
  const mine = `${session.owner}/${session.repo}`;
  const bound = `a search must be bound to ${mine} with repo:${mine}`;
  const terms = searchTerms(q);
  if (!terms) return 'the search query has an unclosed quote';
  let scoped = false;
  for (const term of terms) {
    if (/^(or|not)$/i.test(term) || (!term.startsWith('"') && /[()]/.test(term))) {
      return 'OR, NOT and parentheses are not accepted in a search through the gateway';
    }
    if (term.startsWith('-')) continue;
    const m = SCOPE_QUALIFIER.exec(term);
    if (!m) continue;
    const value = (m[2] as string).replace(/^"(.*)"$/, '$1');
    const kind = (m[1] as string).toLowerCase();
    const ok =
      kind === 'repo' ? isSessionRepo(value, session) : value.toLowerCase() === session.owner.toLowerCase();
    if (!ok) return `${bound}, not ${kind}:${value}`;
    if (kind === 'repo') scoped = true;
  }
  return scoped ? undefined : bound;
}
