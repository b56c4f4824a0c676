import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseWorkItem, workItemSlug } from '../../src/core/work-item.js';
import { Tmux } from '../../src/runners/tmux/tmux.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi, MockUsage } from '../fixtures/mock-apis/types.js';
import { launchBrowser, screenshot } from '../helpers/browser.js';
import { FAKE_ENGINE, freePort, runCli } from '../helpers/cli.js';
import { type DaemonProcess, fixture, sendDelivery, startDaemonProcess } from '../helpers/daemon.js';
import { removeWhenQuiet, stopTmuxServer } from '../helpers/tmux.js';
import { realBinary } from './helpers.js';

/**
 * The console in real Chromium against a real daemon running the real Claude Code TUI in tmux
 * (issue 14's acceptance): log in through the printed link, watch the session live, see a second
 * delivery pasted as it happens, type and resize as a viewer without effect, take over (typed text
 * reaches the TUI, deliveries are held), hand back (the held delivery runs), and read the bill.
 */

const socket = `the-loop-console-${randomUUID().slice(0, 8)}`;
const tmux = new Tmux({ socket });
const SECRET = 'webhook-secret-for-the-console-0123';
const WI = 'github:acme/widgets#15';
const TARGET = `loop-${workItemSlug(parseWorkItem(WI))}`;

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 120_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}

const tokensOf = (list: MockUsage[]) =>
  list.reduce((n, u) => n + u.input + u.output + (u.cacheRead ?? 0) + (u.cacheCreation ?? 0), 0);

describe('console: the real Claude Code TUI watched, taken over and accounted in real Chromium', () => {
  let root: string;
  let mock: MockApi & { sideReported: MockUsage[] };
  let daemon: DaemonProcess | undefined;
  let env: Record<string, string>;
  let browser: Browser;
  let closeBrowser: () => Promise<void>;
  let page: Page;

  const cli = (args: string[]) => runCli(args, { cwd: root, env, timeoutMs: 150_000 });
  const pane = async () => (await tmux.run(['capture-pane', '-p', '-t', `=${TARGET}:`])).stdout;
  const windowWidth = async () =>
    Number((await tmux.run(['display', '-p', '-t', `=${TARGET}:`, '#{window_width}'])).stdout.trim());
  const delivery = async (id: string) =>
    (
      JSON.parse((await cli(['events', 'show', id, '--json'])).stdout) as {
        delivery: { status: string; reason: string | null; heldReason?: string | null };
      }
    ).delivery;
  const settled = (id: string) =>
    until(`delivery ${id} to settle`, async () => {
      const d = await delivery(id);
      return d.status === 'done' || d.status === 'failed' ? d.status : undefined;
    });
  /** What the page shows in an element, line by line (Playwright's rendered text, not the DOM's). */
  // biome-ignore lint/performance/useDomNodeTextContent: a Playwright locator, not a DOM node
  const shown = (selector: string) => page.locator(selector).innerText();
  const terminalText = () => shown('#terminal .xterm-rows');

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-console-'));
    mkdirSync(join(root, 'widgets'));
    mock = await startAnthropicMock({
      sideUsage: { input: 7, output: 3 },
      script: [
        { kind: 'text', text: 'Console answer MANGO-12.', usage: { input: 400, output: 12 } },
        // Slow: the pasted prompt is on screen well before the answer.
        { kind: 'text', text: 'Second answer KIWI-34.', usage: { input: 500, output: 14 }, delayMs: 3000 },
        { kind: 'text', text: 'Held then run LIME-56.', usage: { input: 600, output: 16 } },
      ],
    });
    const home = prepareClaudeHome(join(root, 'engine'), mock.url);
    const stateDir = join(root, 'plain-state');
    mkdirSync(stateDir);
    writeFileSync(
      join(root, 'config.yaml'),
      stringify({
        dataDir: 'data',
        webhook: { secret: SECRET },
        defaults: { engine: 'claude', backstopSeconds: 120 },
        gateway: { port: await freePort() },
        routing: { runner: 'tmux', triggers: { labels: ['the-loop'] } },
        repos: { 'acme/widgets': { path: join(root, 'widgets') } },
        tmux: { socket, readySeconds: 60 },
        engines: {
          claude: { binary: realBinary('claude'), env: { ...home.env, CLAUDE_CODE_SANDBOXED: '1' } },
          // Plain text: nothing in its output is a usage figure (an unmetered run).
          plain: {
            binary: FAKE_ENGINE,
            protocol: 'text',
            sessionId: 'none',
            headless: { args: ['-p'], promptPrefix: ['--'] },
            env: { FAKE_ENGINE_STATE: stateDir },
          },
        },
      }),
    );
    env = { THE_LOOP_CONFIG: join(root, 'config.yaml'), ANTHROPIC_API_KEY: 'sk-console-canary-0123456789' };
    daemon = await startDaemonProcess({ cwd: root, env });
    ({ browser, close: closeBrowser } = await launchBrowser());
    page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
  }, 120_000);

  afterAll(async () => {
    await closeBrowser?.();
    await daemon?.stop();
    await stopTmuxServer(tmux);
    await mock?.close();
    if (root && !process.env.THE_LOOP_KEEP_TEST_DIR) await removeWhenQuiet(root);
  });

  it('logs in through the printed link and lists the tmux session live', async () => {
    const link = await cli(['console', '--json']);
    expect(link.code, link.stderr).toBe(0);
    const { url } = JSON.parse(link.stdout) as { url: string };
    await page.goto(url);
    expect(new URL(page.url()).pathname).toBe('/sessions');
    const first = await sendDelivery(daemon?.webhookUrl ?? '', SECRET, 'issues', fixture('issues.labeled'));
    expect(first.status).toBe(202);
    // Live: the row appears without a reload.
    await page.getByRole('link', { name: WI }).waitFor({ timeout: 90_000 });
    expect(await shown('table')).toContain('tmux');
    expect(await settled(first.id)).toBe('done');
    await screenshot(page, 'console-sessions');
  }, 180_000);

  it('shows the conversation in the terminal, and a second delivery as it is pasted', async () => {
    await page.getByRole('link', { name: WI }).click();
    await page.locator('#terminal .xterm-rows').waitFor();
    await until('the first answer on screen', async () =>
      (await terminalText()).includes('MANGO-12') ? true : undefined,
    );
    const second = await sendDelivery(
      daemon?.webhookUrl ?? '',
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect(second.status).toBe(202);
    // The comment's words reach the open page while the model is still answering.
    await until('the pasted delivery on screen', async () =>
      (await terminalText()).includes('empty state should render') ? true : undefined,
    );
    expect(mock.modelTurns().length).toBeLessThan(3);
    expect(await settled(second.id)).toBe('done');
    await until('the second answer on screen', async () =>
      (await terminalText()).includes('KIWI-34') ? true : undefined,
    );
    await screenshot(page, 'console-session-terminal');
  }, 180_000);

  it('as a viewer, typed keys and a resize change nothing in the pane', async () => {
    const width = await windowWidth();
    await page.locator('#terminal').click();
    await page.keyboard.type('zq-viewer-keys');
    await page.keyboard.press('Enter');
    await page.setViewportSize({ width: 700, height: 500 });
    await new Promise((r) => setTimeout(r, 1500));
    expect(await pane()).not.toContain('zq-viewer-keys');
    expect(await windowWidth()).toBe(width);
    await page.setViewportSize({ width: 1400, height: 1000 });
  }, 60_000);

  it('after take over, typed text reaches the TUI and deliveries are held; after hand back the held one runs', async () => {
    await page.locator('#takeover').click();
    await page.locator('#role[data-role="writer"]').waitFor();
    await page.locator('#terminal').click();
    await page.keyboard.type('typed-by-a-person');
    await until('the typed text in the pane', async () =>
      (await pane()).includes('typed-by-a-person') ? true : undefined,
    );
    // Only the writer resizes the agent's window.
    const before = await windowWidth();
    await page.locator('#fit').click();
    await until('the writer resizing the window', async () =>
      (await windowWidth()) !== before ? true : undefined,
    );
    // The button took the focus: back to the terminal to erase what was typed.
    await page.locator('#terminal').click();
    for (let i = 0; i < 'typed-by-a-person'.length; i++) await page.keyboard.press('Backspace');
    await until('the typed text erased', async () =>
      (await pane()).includes('typed-by-a-person') ? undefined : true,
    );

    const held = await sendDelivery(
      daemon?.webhookUrl ?? '',
      SECRET,
      'issue_comment',
      fixture('issue_comment.created'),
    );
    expect(held.status).toBe(202);
    const reason = await until('the delivery held', async () => {
      const d = await delivery(held.id);
      const why = d.heldReason ?? d.reason ?? '';
      return d.status === 'queued' && why.includes('taken over') ? why : undefined;
    });
    expect(reason).toMatch(/taken over by/);
    const listed = await cli(['sessions', 'list']);
    expect(listed.stdout).toContain('taken over by');
    // Shown on every page.
    expect(await shown('body')).toMatch(/taken over/i);
    await screenshot(page, 'console-session-taken-over');

    await page.locator('#handback').click();
    await page.locator('#role[data-role="viewer"]').waitFor();
    expect(await settled(held.id)).toBe('done');
    await until('the held delivery answered on screen', async () =>
      (await terminalText()).includes('LIME-56') ? true : undefined,
    );
  }, 240_000);

  it('the usage page shows the mock’s totals and the unmetered engine under "Not included"', async () => {
    const plain = await cli([
      'run',
      'github:acme/plain#1',
      '--engine',
      'plain',
      '--cwd',
      root,
      '--',
      'hello',
    ]);
    expect(plain.code, plain.stdout + plain.stderr).toBe(0);
    await page.goto(new URL('/usage', page.url()).toString());
    const text = () => shown('main');
    const total = tokensOf([...mock.reported, ...mock.sideReported]);
    await until('the totals', async () =>
      (await text()).includes(total.toLocaleString('en-US')) ? true : undefined,
    );
    const usage = await text();
    expect(usage).toMatch(/Not included/);
    expect(usage).toContain('plain');
    expect(usage).not.toMatch(/\$0\.00\b/);
    await screenshot(page, 'console-usage');
    await page.goto(new URL('/acts', page.url()).toString());
    await page.locator('main').waitFor();
    await screenshot(page, 'console-acts');
  }, 180_000);
});
