/**
 * The console's pages in real Chromium (issue 14), against a stand-in server that answers the wire
 * contract with canned data (pages-server.ts): the pages render what the API and the live socket
 * say, keep untrusted text as text, never show an unknown cost as $0, run under the plan's CSP
 * with no violation, and their terminal swallows hostile OSC sequences. Each test logs in as a
 * person does (the login page keeps the key, the pages sign every request with it); a browser without
 * the key is told to log in again. Screenshots of each page go to test/.out/screenshots/.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildConsole } from '../../scripts/build-console.js';
import { LOGIN_KEY_META, LOGIN_STORAGE_KEY } from '../../src/console/protocol.js';
import { type CspViolations, collectCspViolations, launchBrowser, screenshot } from '../helpers/browser.js';
import { HOSTILE, ROWS, ROWS_LATER, ROWS_TAKEN } from './pages-fixtures.js';
import { type FakeConsole, startFakeConsole } from './pages-server.js';

let outdir: string;
let fake: FakeConsole;
let browser: Browser;
let closeBrowser: () => Promise<void>;
let context: BrowserContext;
let page: Page;
let csp: CspViolations;
let popups: number;
let dialogs: string[];

beforeAll(async () => {
  outdir = await buildConsole({ outdir: mkdtempSync(join(tmpdir(), 'loop-console-')) });
  fake = await startFakeConsole(outdir);
  ({ browser, close: closeBrowser } = await launchBrowser());
});

afterAll(async () => {
  await closeBrowser?.();
  await fake?.close();
  if (outdir) rmSync(outdir, { recursive: true, force: true });
});

beforeEach(async () => {
  fake.setRows(ROWS);
  fake.posts.length = 0;
  fake.gets.length = 0;
  fake.terminalIn.length = 0;
  context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  // Counted from here: a page opened later is a window the console let content open.
  popups = 0;
  context.on('page', () => {
    popups++;
  });
  csp = collectCspViolations(page);
  // Logged in as through a printed link: the login page keeps the key and leaves for /sessions.
  await page.goto(`${fake.url}/login/v1.any`);
  await page.waitForURL(`${fake.url}/sessions`);
  // xterm.js asks `confirm()` before opening a link it has no handler for: none may come up.
  dialogs = [];
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
});

afterEach(async () => {
  await context.close();
});

/** The text a person sees in the element (Playwright's innerText: rendered, hidden parts left out). */
function shown(locator: Locator): Promise<string> {
  // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator.innerText(), not the DOM property.
  return locator.innerText();
}

/** What every page must hold to: no CSP violation, no script run from data, the live socket open. */
async function expectClean(): Promise<void> {
  await expect.poll(() => page.locator('#connection').getAttribute('data-state')).toBe('open');
  expect(await page.evaluate('window.__pwned')).toBeUndefined();
  expect(await page.locator('main img').count()).toBe(0);
  expect(csp.messages).toEqual([]);
}

describe('logging in', () => {
  it('keeps the key in localStorage only, leaves a clean address, and signs every request', async () => {
    expect(new URL(page.url()).pathname).toBe('/sessions');
    const kept = JSON.parse((await page.evaluate(`localStorage.getItem('${LOGIN_STORAGE_KEY}')`)) as string);
    expect(kept.publicId).toBe(fake.publicId);
    expect(await page.locator(`meta[name="${LOGIN_KEY_META}"]`).count()).toBe(0);
    await expect.poll(() => fake.gets).toContain('/api/sessions');
    await expectClean();
  });

  it('a browser without the key (another profile) is told to log in again, and asks nothing', async () => {
    const other = await browser.newContext();
    try {
      const fresh = await other.newPage();
      fake.gets.length = 0;
      await fresh.goto(`${fake.url}/sessions`);
      await expect
        .poll(() => fresh.locator('#error').textContent())
        .toContain('log in again: run `the-loop console`');
      expect(await fresh.locator('#connection').getAttribute('data-state')).toBe('refused');
      expect(fake.gets).toEqual([]);
    } finally {
      await other.close();
    }
  });
});

describe('sessions page', () => {
  it('lists the sessions, unknown cost as "unknown", hostile text as text, and follows the live socket', async () => {
    await page.goto(`${fake.url}/sessions`);
    const rows = page.locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(ROWS.length);
    const hostile = page.locator('tr[data-session="s-unknown"]');
    expect(await shown(hostile.locator('th'))).toContain(HOSTILE);
    const cells = await hostile.locator('td').allInnerTexts();
    expect(cells).toContain('unknown');
    expect(cells.join(' ')).not.toMatch(/\$0(?!\.\d*[1-9])/);
    expect(await shown(page.locator('tr[data-session="s-over"]'))).toContain('over budget: 1.00 of 1.00');
    // A sum that leaves unpriced rows out says so.
    expect(await shown(page.locator('tr[data-session="s-tmux"]'))).toContain(
      '~$0.4200 + unknown (3 unpriced)',
    );
    expect(await page.locator('a[href="/sessions/s-priced"]').count()).toBe(1);
    await screenshot(page, 'sessions');

    fake.setRows(ROWS_LATER);
    await expect.poll(() => rows.count()).toBe(ROWS_LATER.length);
    expect(await shown(page.locator('tr[data-session="s-priced"] [data-status]'))).toBe('running');
    expect(await page.locator('#banner').isHidden()).toBe(true);

    fake.setRows(ROWS_TAKEN);
    await expect.poll(() => page.locator('#banner').isVisible()).toBe(true);
    expect(await shown(page.locator('#banner'))).toContain('acme/app#3 by ada@laptop');
    expect(await shown(page.locator('tr[data-session="s-tmux"]'))).toContain('taken over');
    await screenshot(page, 'sessions-taken-over');
    await expectClean();
  });
});

describe('session page', () => {
  it('shows a process session’s turns and streams its events, untrusted text as text', async () => {
    await page.goto(`${fake.url}/sessions/s-unknown`);
    await expect.poll(() => page.locator('article.turn').count()).toBe(2);
    expect(await shown(page.locator('#title'))).toBe(`Session acme/app#2 ${HOSTILE}`);
    expect(await page.title()).toBe('Session · the-loop');
    expect(await shown(page.locator('.turn .error'))).toContain(`engine crashed: ${HOSTILE}`);
    const costs = await page.locator('.turn dd.unknown').allInnerTexts();
    expect(costs).toEqual(['unknown', 'unknown']);
    expect(await shown(page.locator('.turn[data-turn="1"]'))).toContain('not measured (unmetered engine)');
    await expect.poll(() => page.locator('#events li').count()).toBe(4);
    const lines = await page.locator('#events li').allInnerTexts();
    expect(lines[0]).toContain(`Reading ${HOSTILE}`);
    expect(lines[1]).toContain('Bash {"command":"ls"}');
    expect(lines[3]).toContain('10 in · 5 out');
    await screenshot(page, 'session-process');
    await expectClean();
  });
});

/** Hostile output: an OSC 2 title, an OSC 52 clipboard write, an OSC 8 javascript: link, colour. */
const HOSTILE_OUTPUT = Buffer.from(
  'hello \x1b]2;PWNED TITLE\x07\x1b]0;PWNED TOO\x1b\\' +
    '\x1b]52;c;UFdORUQtQ0xJUA==\x07' +
    '\x1b]8;;javascript:window.__pwned=2\x07click me\x1b]8;;\x07 ' +
    '\x1b]8;;https://evil.example/\x07and me\x1b]8;;\x07 \x1b[31mred\x1b[0m\r\n',
);

describe('session page: a tmux session’s terminal', () => {
  it('is sized by the server, swallows hostile OSC, acknowledges bytes, and is read-only until take over', async () => {
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: fake.url });
    await page.goto(`${fake.url}/sessions/s-tmux`);
    await expect.poll(() => fake.terminals()).toBe(1);
    await expect.poll(() => shown(page.locator('#role'))).toBe('watching — read only');
    expect(await shown(page.locator('.turn[data-turn="1"]'))).toContain(
      '~$0.4200 (list-price) + unknown (3 unpriced)',
    );
    // The server said 100x30: the viewer never fits the terminal to its box.
    await expect.poll(() => page.locator('.xterm-rows > div').count()).toBe(30);
    await page.evaluate("navigator.clipboard.writeText('before')");

    fake.sendTerminal(HOSTILE_OUTPUT);
    const screen = page.locator('.xterm-rows');
    // xterm.js renders runs of spaces as no-break spaces.
    const screenText = async () => (await shown(screen)).replace(/\u00a0/g, ' ');
    await expect.poll(screenText).toContain('hello click me and me red');
    expect(await page.title()).toBe('Session · the-loop');
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe('before');
    await expect
      .poll(() => fake.terminalIn.filter((m) => m.t === 'ack').at(-1)?.bytes)
      .toBe(HOSTILE_OUTPUT.length);

    // The links were never made: clicking their text neither navigates nor opens a window.
    const url = page.url();
    const row = screen.locator('> div').first();
    const box = await row.boundingBox();
    if (!box) throw new Error('the first row has no box');
    const text = (await shown(row)).replace(/\u00a0/g, ' ');
    // The rows take no pointer events (xterm.js's screen does): hover each link's text, as a person
    // would (xterm.js finds a link under the pointer on mouse move), then click it. A row is 100
    // cells wide.
    for (const words of ['click me', 'and me']) {
      const x = box.x + (box.width / 100) * (text.indexOf(words) + 2);
      await page.mouse.move(x, box.y + box.height / 2);
      await page.waitForTimeout(100);
      await page.mouse.click(x, box.y + box.height / 2);
    }
    await page.waitForTimeout(200);
    expect(page.url()).toBe(url);
    expect(popups).toBe(0);
    expect(dialogs).toEqual([]);

    // A viewer's keys go nowhere (the daemon would drop them too).
    await page.locator('.xterm-screen').click();
    await page.keyboard.type('rm -rf /');
    await page.waitForTimeout(200);
    expect(fake.terminalIn.filter((m) => m.t !== 'ack')).toEqual([]);
    await screenshot(page, 'session-tmux-viewer');

    await page.locator('#takeover').click();
    await expect.poll(() => shown(page.locator('#role'))).toBe('you are typing: deliveries are held');
    expect(fake.posts).toEqual([
      { path: '/api/sessions/s-tmux/takeover', body: {}, ticketOk: true, origin: fake.url },
    ]);
    await expect.poll(() => shown(page.locator('#banner'))).toContain('acme/app#3 by ada@laptop');
    await expect.poll(() => shown(page.locator('#summary [data-status]'))).toBe('taken over');
    await page.locator('.xterm-screen').click();
    await page.keyboard.type('ls');
    await expect
      .poll(() => fake.terminalIn.filter((m) => m.t === 'input').map((m) => m.data))
      .toEqual(['l', 's']);
    await screenshot(page, 'session-tmux-writer');

    await page.locator('#handback').click();
    await expect.poll(() => shown(page.locator('#role'))).toBe('watching — read only');
    expect(fake.posts.map((p) => p.path)).toEqual([
      '/api/sessions/s-tmux/takeover',
      '/api/sessions/s-tmux/handback',
    ]);
    await expect.poll(() => page.locator('#banner').isHidden()).toBe(true);
    expect(fake.terminalIn.some((m) => m.t === 'resize')).toBe(false);
    await expectClean();
  });
});

describe('usage page', () => {
  it('shows the totals, a chart, the groups and what is not included; unknown is never $0', async () => {
    await page.goto(`${fake.url}/usage`);
    await expect.poll(() => page.locator('#totals').count()).toBe(1);
    expect(await shown(page.locator('#totals'))).toContain('144,000 tokens in 6 turns');
    expect(await shown(page.locator('#totals'))).toContain('~$1.75 + unknown');
    expect(await page.locator('svg.chart rect.bar').count()).toBe(2);
    expect(await page.locator('svg.chart .unknown-mark').count()).toBe(1);
    const day = page.locator('tbody tr', { hasText: '2025-05-31' });
    expect(await day.locator('td').allInnerTexts()).toContain('unknown');
    const notIncluded = await shown(page.locator('#not-included'));
    expect(notIncluded).toContain('codex');
    expect(notIncluded).toContain('unmetered engine: no usage reported');
    expect(notIncluded).toContain('mystery-model-1');
    expect(await shown(page.locator('main'))).not.toMatch(/\$0(?!\.\d*[1-9])/);
    await screenshot(page, 'usage-day');

    await page.locator('button[data-by="engine"]').click();
    await expect.poll(() => shown(page.locator('thead th').first())).toBe('Engine');
    expect(fake.gets).toContain('/api/usage?by=engine&since=7d');
    expect(await page.locator('tbody th').allInnerTexts()).toContain(`gemini ${HOSTILE}`);
    expect(new URL(page.url()).search).toBe('?by=engine&since=7d');
    await screenshot(page, 'usage-engine');
    await expectClean();
  });
});

describe('acts page', () => {
  it('lists acts with breaches marked, filters breaches, and resumes a held session with its ticket', async () => {
    await page.goto(`${fake.url}/acts`);
    await expect.poll(() => page.locator('#acts tbody tr').count()).toBe(2);
    expect(await page.locator('#acts tr.breach').count()).toBe(1);
    expect(await page.locator('#acts code.command').allInnerTexts()).toContain(`git log ${HOSTILE}`);
    const held = page.locator('#held tbody tr');
    expect(await held.count()).toBe(1);
    expect(await shown(held)).toContain('acme/app#4');
    await screenshot(page, 'acts');

    await page.locator('#breaches-only').check();
    await expect.poll(() => page.locator('#acts tbody tr').count()).toBe(1);
    expect(fake.gets).toContain('/api/acts?breaches=1');

    await held.getByLabel('Raise by').fill('5');
    await held.getByRole('button', { name: 'Resume' }).click();
    await expect.poll(() => shown(held.locator('.result'))).toBe('raised and resumed');
    expect(fake.posts).toEqual([
      { path: '/api/sessions/s-over/resume', body: { raise: '5' }, ticketOk: true, origin: fake.url },
    ]);
    await screenshot(page, 'acts-breaches');
    await expectClean();
  });
});
