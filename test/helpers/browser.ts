/**
 * Real Chromium for the console's tests (issue 14): Debian's `chromium` driven by playwright-core
 * through `executablePath` (never `playwright install`: no browser download in tests or CI).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Browser, chromium, type Page } from 'playwright-core';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SCREENSHOTS = join(ROOT, 'test', '.out', 'screenshots');

/** $CHROMIUM_PATH, else /usr/bin/chromium, else whatever `which chromium` finds. */
export function chromiumPath(): string {
  const given = process.env.CHROMIUM_PATH;
  if (given) return given;
  if (existsSync('/usr/bin/chromium')) return '/usr/bin/chromium';
  try {
    return execFileSync('which', ['chromium'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('no chromium found: install Debian’s chromium package or set CHROMIUM_PATH');
  }
}

/**
 * Flags: no sandbox (containers have no user namespaces for it), and nothing that phones home
 * (component updates, sync, background networking) so a test's network is only its own server.
 */
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launchBrowser(): Promise<{ browser: Browser; close: () => Promise<void> }> {
  const browser = await chromium.launch({ executablePath: chromiumPath(), args: ARGS, headless: true });
  return {
    browser,
    close: async () => {
      await browser.close();
    },
  };
}

export interface CspViolations {
  /** The console lines Chromium logged for refused content, in order. */
  readonly messages: string[];
}

/**
 * Collects the page's Content-Security-Policy violations. Chromium reports each as a console error
 * ("Refused to … because it violates the following Content Security Policy directive: …"), which
 * names the directive; an init script listening for `securitypolicyviolation` would be script the
 * page did not ship.
 */
export function collectCspViolations(page: Page): CspViolations {
  const messages: string[] = [];
  page.on('console', (message) => {
    const text = message.text();
    if (message.type() === 'error' && /Content Security Policy/i.test(text)) messages.push(text);
  });
  return { messages };
}

/** Save a full-page screenshot as test/.out/screenshots/<name>.png; returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  const path = join(SCREENSHOTS, `${name.replace(/[^\w.-]+/g, '-')}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}
