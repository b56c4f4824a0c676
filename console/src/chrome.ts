/**
 * What every page shares: the live socket, the take-over banner (a person typing in a session holds
 * its deliveries: everyone looking at the console should see it, on any page) and the connection
 * state (a page that stopped updating must not look current).
 */
import type { LiveMessage, SessionRow } from '../../src/console/protocol.js';
import { byId, fill, h } from './dom.js';
import { formatAgo, formatDate } from './format.js';
import { connectLive, type Live } from './live.js';

export interface PageOptions {
  /** The session the page watches (its detail and events arrive on the live socket). */
  watch?: string | null;
  onMessage?(message: LiveMessage): void;
}

/** The sessions taken over, as a banner (empty when none). */
export function renderBanner(rows: readonly SessionRow[]): void {
  const banner = byId('banner');
  const taken = rows.filter((row) => row.takeover !== null);
  if (taken.length === 0) {
    fill(banner);
    banner.hidden = true;
    return;
  }
  banner.hidden = false;
  fill(
    banner,
    h('strong', {}, 'Taken over: deliveries are held while a person types. '),
    ...taken.map((row) => {
      const t = row.takeover;
      if (!t) return null;
      return h(
        'span',
        { class: 'banner-item' },
        h('a', { href: `/sessions/${encodeURIComponent(row.id)}` }, row.workItem),
        ` by ${t.by} since ${formatDate(t.since)} (${formatAgo(t.since)}) `,
      );
    }),
  );
}

function renderState(state: string, detail: string): void {
  const node = document.getElementById('connection');
  if (!node) return;
  node.dataset.state = state;
  const words: Record<string, string> = {
    connecting: 'connecting…',
    open: 'live',
    closed: `disconnected${detail ? ` (${detail})` : ''}: retrying`,
    refused: 'not connected',
  };
  node.textContent = words[state] ?? state;
}

/** Marks the current page's link in the navigation (aria-current), from the path. */
function markNav(): void {
  const page = `/${location.pathname.split('/')[1] ?? ''}`;
  for (const link of document.querySelectorAll<HTMLAnchorElement>('nav a')) {
    if (link.getAttribute('href') === page) link.setAttribute('aria-current', 'page');
  }
}

/**
 * Start the page's live socket; the banner follows every `sessions` message. A page of a browser
 * that holds no login (its key is kept per browser profile) says to log in again.
 */
export function startPage(options: PageOptions = {}): Live {
  markNav();
  return connectLive({
    watch: options.watch ?? null,
    onState(state, detail) {
      renderState(state, detail);
      // No login kept in this browser (api.ts's LOG_IN_AGAIN): say so where errors are shown.
      if (state === 'refused') showError(detail);
    },
    onMessage(message) {
      if (message.t === 'sessions') renderBanner(message.rows);
      options.onMessage?.(message);
    },
  });
}

/** A failure shown in the page's alert area (role=alert: screen readers announce it). */
export function showError(error: unknown): void {
  const node = document.getElementById('error');
  if (!node) return;
  node.hidden = false;
  node.textContent = error instanceof Error ? error.message : String(error);
}
