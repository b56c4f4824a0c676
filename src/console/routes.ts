import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../log/logger.js';
import { hostAllowed, principalOf } from './access.js';
import { type ApiContext, handleApi } from './api.js';
import type { LoginCheck } from './auth.js';
import { loggablePath, loginCookie, secure, send, sendError, sendJson, sendMessagePage } from './http.js';
import { type PageName, type Pages, renderLogin } from './pages.js';
import { SESSION_ID } from './ports.js';

/**
 * The console's HTTP routes. Every response carries the security headers; every request names an
 * allowed Host first. Assets and /healthz need no login (nothing secret in them); pages need a
 * browser login's cookie (they hold no data); /api a login with its ticket, or the Bearer token.
 */

export interface RouteContext extends ApiContext {
  pages: Pages;
  /** `Secure` on the cookie (publicOrigin is https). */
  secureCookie: boolean;
  sessionHours: number;
  logger: Logger;
}

const AGAIN = 'Run `the-loop console` on the machine the daemon runs on, and open the link it prints.';

export async function handleRequest(ctx: RouteContext, req: IncomingMessage, res: ServerResponse) {
  secure(res);
  if (!hostAllowed(ctx.access, req)) {
    // Another site's name pointed at this address (DNS rebinding), or a proxy not configured.
    return sendError(
      res,
      421,
      'this host is not the console',
      'Add it to console.allowedHosts if it is yours.',
    );
  }
  let url: URL;
  try {
    url = new URL(req.url ?? '/', 'http://console.invalid');
  } catch {
    return sendError(res, 400, 'bad request');
  }
  const path = url.pathname;
  if (path.startsWith('/api/')) return handleApi(ctx, req, res, url);
  if (req.method !== 'GET' && req.method !== 'HEAD')
    return sendError(res, 405, `${req.method} is not allowed here`);
  if (path === '/healthz') return sendJson(res, 200, { ok: true });
  if (path.startsWith('/assets/')) return serveAsset(ctx, res, path.slice('/assets/'.length));
  if (path.startsWith('/login/')) {
    // A HEAD (a link previewer, a prefetch) must not use up a single-use link it cannot deliver the key of.
    if (req.method !== 'GET') return sendError(res, 405, 'open the login link with GET');
    return logIn(ctx, res, path.slice('/login/'.length));
  }
  if (path === '/') return send(res, 303, '', 'text/plain', { location: '/sessions' });
  const page = pageOf(path);
  if (!page) return sendError(res, 404, 'not found');
  return servePage(ctx, req, res, page);
}

function pageOf(path: string): PageName | undefined {
  if (path === '/sessions' || path === '/usage' || path === '/acts') return path.slice(1) as PageName;
  const one = /^\/sessions\/([^/]+)$/.exec(path);
  return one?.[1] && SESSION_ID.test(one[1]) ? 'session' : undefined;
}

function serveAsset(ctx: RouteContext, res: ServerResponse, name: string) {
  const asset = ctx.pages.asset(name);
  if (!asset) return sendError(res, 404, 'not found');
  send(res, 200, asset.body, asset.type);
}

/**
 * A login link: exchanged once for the cookie and the login page, which carries the login's key
 * for the browser to keep (localStorage) and then leaves for /sessions with location.replace: the
 * code does not stay in the address bar, nor the login page in the history. The answer is never
 * cached (no-store, as every answer).
 */
function logIn(ctx: RouteContext, res: ServerResponse, code: string) {
  const template = ctx.pages.template('login');
  // Checked before the code: a link is not used up by a console that cannot finish the login.
  if (template === undefined) return notBuilt(ctx, res, 'login');
  const check = ctx.access.auth.checkLoginCode(code);
  if (!check.ok) {
    ctx.logger.warn('console: login refused', { path: loggablePath('/login/'), why: check.why });
    return sendMessagePage(res, 403, 'This login link cannot be used', [REFUSED[check.why], AGAIN]);
  }
  const { sid, login, key } = ctx.access.auth.createLogin(check.who);
  ctx.logger.info('console: logged in', { who: login.who, login: login.publicId });
  send(res, 200, renderLogin(template, { key, publicId: login.publicId }), 'text/html; charset=utf-8', {
    'set-cookie': loginCookie(sid, { secure: ctx.secureCookie, maxAgeS: ctx.sessionHours * 3600 }),
  });
}

const REFUSED: Record<Extract<LoginCheck, { ok: false }>['why'], string> = {
  used: 'It was used already: each link logs in once.',
  expired: 'It has expired: a link is valid for one minute.',
  'before-start': 'It was made before the daemon (re)started: only links of the running daemon are accepted.',
  malformed: 'It is not a valid login link.',
  forged: 'It is not a valid login link.',
};

function notBuilt(ctx: RouteContext, res: ServerResponse, page: string) {
  return sendMessagePage(res, 503, 'The console is not built', [
    `${page}.html is missing from ${ctx.pages.dir}.`,
    'Build it with `npm run build` and restart the daemon.',
  ]);
}

/** A page: its template as built, for a login's cookie (it holds no data: the API has the data). */
function servePage(ctx: RouteContext, req: IncomingMessage, res: ServerResponse, page: PageName) {
  const principal = principalOf(ctx.access, req);
  if (principal?.kind !== 'login') {
    return sendMessagePage(res, 401, 'Log in to the console', [
      'You are not logged in, or your login expired (a daemon restart logs every browser out).',
      AGAIN,
    ]);
  }
  const template = ctx.pages.template(page);
  if (template === undefined) return notBuilt(ctx, res, page);
  send(res, 200, template, 'text/html; charset=utf-8');
}
