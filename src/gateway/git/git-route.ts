import type { GatewaySession } from '../types.js';

/**
 * Which git smart HTTP endpoint a gateway path names, and where it goes upstream. Pure. Only the
 * session's own repository, and only the three endpoints of the smart protocol
 * (Documentation/gitprotocol-http.txt "Smart Clients"): the ref advertisement
 * `GET …/info/refs?service=<service>`, and `POST …/git-upload-pack` / `POST …/git-receive-pack`.
 * The dumb protocol (plain files under the repository) is never served: it would bypass the
 * receive-pack check for nothing (it cannot push) and expose paths we do not need.
 */

export type GitService = 'git-upload-pack' | 'git-receive-pack';

export type GitRoute =
  | {
      ok: true;
      endpoint: 'info/refs' | GitService;
      service: GitService;
      /** The upstream path and query, built from the session's repository (never from client text). */
      upstreamPath: string;
    }
  | { ok: false; status: 403 | 404 | 405; message: string; allow?: string };

const PREFIX = '[the-loop gateway]';
/** GitHub's owner and repository names: letters, digits, `-`, `_`, `.`. */
const NAME = /^[A-Za-z0-9_.-]{1,100}$/;
const SERVICES: readonly GitService[] = ['git-upload-pack', 'git-receive-pack'];

const bare = (repo: string): string => repo.replace(/\.git$/i, '');

/** Route `path` (what follows `/git/`, query included) for `method`, for this session. */
export function routeGit(
  path: string,
  method: string,
  session: Pick<GatewaySession, 'owner' | 'repo'>,
): GitRoute {
  const q = path.indexOf('?');
  const pathname = q >= 0 ? path.slice(0, q) : path;
  const query = new URLSearchParams(q >= 0 ? path.slice(q + 1) : '');
  const m = /^([^/]+)\/([^/]+)\/(.+)$/.exec(pathname);
  if (!m) return notFound();
  const [, owner = '', repo = '', rest = ''] = m;
  if (!NAME.test(owner) || !NAME.test(repo)) return notFound();
  const own = `${session.owner}/${bare(session.repo)}`;
  if (
    `${owner}/${bare(repo)}`.toLowerCase() !== own.toLowerCase() ||
    !NAME.test(session.owner) ||
    !NAME.test(bare(session.repo))
  ) {
    return {
      ok: false,
      status: 403,
      message: `${PREFIX} this session may reach only the repository ${own}, not ${owner}/${bare(repo)}`,
    };
  }
  const base = `/${session.owner}/${bare(session.repo)}.git`;
  if (rest === 'info/refs') {
    if (method !== 'GET') return notAllowed('GET');
    const service = query.get('service');
    if (!service || !SERVICES.includes(service as GitService)) {
      return {
        ok: false,
        status: 404,
        message: `${PREFIX} only git's smart HTTP protocol is served (service=git-upload-pack or git-receive-pack)`,
      };
    }
    return {
      ok: true,
      endpoint: 'info/refs',
      service: service as GitService,
      upstreamPath: `${base}/info/refs?service=${service}`,
    };
  }
  if (SERVICES.includes(rest as GitService)) {
    if (method !== 'POST') return notAllowed('POST');
    const service = rest as GitService;
    return { ok: true, endpoint: service, service, upstreamPath: `${base}/${service}` };
  }
  return notFound();
}

const notFound = (): GitRoute => ({
  ok: false,
  status: 404,
  message: `${PREFIX} not a git smart HTTP endpoint (expected <owner>/<repo>.git/info/refs, git-upload-pack or git-receive-pack)`,
});

const notAllowed = (allow: string): GitRoute => ({
  ok: false,
  status: 405,
  message: `${PREFIX} method not allowed here (use ${allow})`,
  allow,
});
