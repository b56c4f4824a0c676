import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { escapeHtml } from './http.js';
import { LOGIN_ID_META, LOGIN_KEY_META } from './protocol.js';

/**
 * The front end's files (built by `npm run build` into dist/console-ui/), read once at start: the four
 * page templates, the login page and a fixed list of assets. A request names an asset from that list
 * or gets a 404; no request path ever reaches the file system, so no path can traverse out of it.
 * The pages are served as they are: they hold no data and no credential (the browser makes its
 * tickets), so a cookie alone gets nothing from them.
 */

export const PAGES = ['sessions', 'session', 'usage', 'acts'] as const;
export type PageName = (typeof PAGES)[number];
/** The pages and the login page (filled in with the login's key and public id). */
const TEMPLATES = [...PAGES, 'login'] as const;
export type TemplateName = (typeof TEMPLATES)[number];

const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.woff': 'font/woff',
  '.txt': 'text/plain; charset=utf-8',
};
/** An asset larger than this is not served (the bundle is a few hundred KB). */
const MAX_ASSET_BYTES = 16 * 1024 * 1024;
const ASSET_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$/;

export interface Asset {
  body: Buffer;
  type: string;
}

export interface Pages {
  /** The page's template, or undefined when the front end is not built. */
  template(name: TemplateName): string | undefined;
  asset(name: string): Asset | undefined;
  /** Where the files were read from, and what was missing (said once in the log at start). */
  dir: string;
  missing: string[];
}

/**
 * dist/console-ui: the front end's build (scripts/build-console.ts), beside tsc's dist/console/
 * where this module runs from when built; from src/console (tsx, tests), the last build's.
 */
export function defaultStaticDir(): string {
  const here = fileURLToPath(new URL('.', import.meta.url));
  const built = join(here, '..', 'console-ui');
  return existsSync(join(built, 'sessions.html')) ? built : join(here, '..', '..', 'dist', 'console-ui');
}

/** Read the templates and the assets of `dir` (missing files are reported, not fatal). */
export function loadPages(dir: string): Pages {
  const templates = new Map<TemplateName, string>();
  const missing: string[] = [];
  for (const name of TEMPLATES) {
    const path = join(dir, `${name}.html`);
    const text = existsSync(path) ? readFileSync(path, 'utf8') : undefined;
    // A login page that could not hand the key over (a build of another version) is not served.
    if (text !== undefined && (name !== 'login' || hasLoginTags(text))) templates.set(name, text);
    else missing.push(`${name}.html`);
  }
  const assets = new Map<string, Asset>();
  const assetDir = join(dir, 'assets');
  if (existsSync(assetDir)) {
    for (const name of readdirSync(assetDir)) {
      const type = CONTENT_TYPES[extname(name).toLowerCase()];
      const path = join(assetDir, name);
      if (!type || !ASSET_NAME.test(name)) continue;
      const stat = statSync(path);
      if (!stat.isFile() || stat.size > MAX_ASSET_BYTES) continue;
      assets.set(name, { body: readFileSync(path), type });
    }
  } else missing.push('assets/');
  return {
    dir,
    missing,
    template: (name) => templates.get(name),
    asset: (name) => (ASSET_NAME.test(name) ? assets.get(name) : undefined),
  };
}

const metaTag = (name: string) => new RegExp(`<meta\\s+name="${name}"\\s+content="[^"]*"\\s*/?>`);
const KEY_TAG = metaTag(LOGIN_KEY_META);
const ID_TAG = metaTag(LOGIN_ID_META);

const hasLoginTags = (template: string) => KEY_TAG.test(template) && ID_TAG.test(template);

/**
 * The login page with the login's key and public id in its meta tags (HTML-escaped), for its script
 * to move into localStorage (loadPages keeps only a template that has both tags).
 */
export function renderLogin(template: string, login: { key: string; publicId: string }): string {
  return template
    .replace(KEY_TAG, () => `<meta name="${LOGIN_KEY_META}" content="${escapeHtml(login.key)}">`)
    .replace(ID_TAG, () => `<meta name="${LOGIN_ID_META}" content="${escapeHtml(login.publicId)}">`);
}
