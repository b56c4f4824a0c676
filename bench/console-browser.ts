/**
 * Part 2 of `npm run bench:console`: output throughput into a headless browser. One Chromium
 * (/usr/bin/chromium through playwright-core), one page at a time showing the bench's tmux pane —
 * the console's session page (logged in through a login link) or wetty's page — while the pane
 * prints base64 of N MiB of random bytes and then an end marker. Timed from the moment the bench
 * asks the pane to print until the marker is on the page's terminal screen (the xterm.js DOM
 * renderer's rows; wetty's WebGL renderer, which gets a context here through SwiftShader (software
 * WebGL, as playwright launches Chromium), through its global `wetty_term`'s buffer). wetty is
 * measured as it ships (WebGL) and, for reference, in a Chromium with WebGL off (`--disable-3d-apis`)
 * where it falls back to xterm.js's DOM renderer, as the console's page uses. The pages alternate
 * run by run after one warm-up run each; only the page under test is open during its run.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { type Browser, chromium, type Page } from 'playwright-core';
import { type Percentiles, percentiles, type Rig, sleep } from './console-rig.js';

export const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface BrowserTarget {
  name: string;
  /** Extra Chromium flags (a second browser is launched for targets that have them). */
  flags?: string[];
  /** Open the page (and log in); resolves once its terminal shows the pane. */
  open(browser: Browser): Promise<Page>;
}

export async function launch(flags: string[] = []): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...ARGS, ...flags] });
}

/** Chromium with WebGL off (`--disable-3d-apis`): wetty's WebGL addon fails and xterm.js draws with the DOM. */
export const NO_WEBGL = ['--disable-3d-apis'];

/** What the functions run in the page use of it (the bench is typed without the DOM library). */
interface PageGlobals {
  document: { querySelector(selector: string): { textContent: string | null } | null };
  wetty_term?: {
    buffer: {
      active: {
        length: number;
        getLine(i: number): { translateToString(trim: boolean): string } | undefined;
      };
    };
  };
}

/** Is `marker` on the page's terminal screen? (runs in the page) */
function onScreen(marker: string): boolean {
  const page = globalThis as unknown as PageGlobals;
  const rows = page.document.querySelector('.xterm-rows');
  if (rows) return (rows.textContent ?? '').includes(marker);
  const term = page.wetty_term;
  if (!term) return false;
  const buffer = term.buffer.active;
  for (let i = Math.max(0, buffer.length - 200); i < buffer.length; i++) {
    if (buffer.getLine(i)?.translateToString(true).includes(marker)) return true;
  }
  return false;
}

export async function waitOnScreen(page: Page, marker: string, timeoutMs = 120_000): Promise<void> {
  await page.waitForFunction(onScreen, marker, { polling: 10, timeout: timeoutMs });
}

/** Which renderer the page's terminal uses (said in the report). */
export async function rendererOf(page: Page): Promise<string> {
  return page.evaluate(() => {
    const { document } = globalThis as unknown as PageGlobals;
    if (document.querySelector('.xterm-rows')) return 'DOM';
    if (document.querySelector('.xterm canvas')) return 'canvas/WebGL';
    return 'unknown';
  });
}

/** A small burst until it is on screen: the page is attached and drawing. */
export async function ready(rig: Rig, page: Page): Promise<void> {
  const marker = `READY-${randomBytes(4).toString('hex')}`;
  const deadline = Date.now() + 20_000;
  // The page may attach after the first print: print again until it shows.
  while (Date.now() < deadline) {
    await rig.burst(64, marker);
    try {
      await waitOnScreen(page, marker, 1_000);
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`the page never showed ${marker}`);
}

export interface ThroughputFigures {
  name: string;
  ms: number[];
  stats: Percentiles;
  /** MB/s of text at the median. */
  mbps: number;
  /** Bytes of text printed per run. */
  bytes: number;
  renderer: string;
}

async function runOnce(rig: Rig, browsers: Browsers, target: BrowserTarget, bytes: number) {
  const page = await target.open(await browsers.for(target));
  try {
    await ready(rig, page);
    const renderer = await rendererOf(page);
    const marker = `END-${randomBytes(6).toString('hex')}`;
    const start = performance.now();
    const [burst] = await Promise.all([rig.burst(bytes, marker), waitOnScreen(page, marker)]);
    return { ms: performance.now() - start, text: burst.bytes, renderer };
  } finally {
    await page.context().close();
    rig.clear();
    await sleep(300);
  }
}

export async function measureThroughput(
  rig: Rig,
  targets: BrowserTarget[],
  options: { bytes: number; reps: number },
): Promise<ThroughputFigures[]> {
  const browsers = new Browsers();
  try {
    const ms = targets.map(() => [] as number[]);
    const renderers = targets.map(() => '');
    let text = 0;
    for (const target of targets) await runOnce(rig, browsers, target, options.bytes);
    for (let rep = 0; rep < options.reps; rep++) {
      for (let i = 0; i < targets.length; i++) {
        const at = (i + rep) % targets.length;
        const r = await runOnce(rig, browsers, targets[at] as BrowserTarget, options.bytes);
        ms[at]?.push(r.ms);
        renderers[at] = r.renderer;
        text = r.text;
      }
    }
    return targets.map((t, i) => {
      const stats = percentiles(ms[i] ?? []);
      return {
        name: t.name,
        ms: ms[i] ?? [],
        stats,
        mbps: text / 1e6 / (stats.p50 / 1000),
        bytes: text,
        renderer: renderers[i] ?? '',
      };
    });
  } finally {
    await browsers.close();
  }
}

/** One Chromium per set of flags, launched on first use. */
class Browsers {
  private readonly open = new Map<string, Promise<Browser>>();

  for(target: BrowserTarget): Promise<Browser> {
    const key = (target.flags ?? []).join(' ');
    let browser = this.open.get(key);
    if (!browser) {
      browser = launch(target.flags);
      this.open.set(key, browser);
    }
    return browser;
  }

  async close(): Promise<void> {
    for (const browser of this.open.values()) await (await browser.catch(() => undefined))?.close();
  }
}

/** wetty's page: it connects its socket.io at load and spawns its own tmux attach. */
export function wettyTarget(url: string, name: string, flags?: string[]): BrowserTarget {
  return {
    name,
    flags,
    open: async (browser) => {
      const context = await browser.newContext({ viewport: { width: 1600, height: 1000 } });
      const page = await context.newPage();
      await page.goto(url);
      return page;
    },
  };
}
