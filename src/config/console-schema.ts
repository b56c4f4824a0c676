import { z } from 'zod';
import { LoopError } from '../core/errors.js';

/**
 * `console:` — the browser console's listener (src/console/), separate from the webhook listener,
 * which may face the internet through a proxy. Loopback by default; any other bind needs the https
 * origin people reach it through, because the console's cookie, Host and Origin checks are only as
 * good as the origin they are bound to (docs/console.md).
 */

/** 127.0.0.0/8, ::1 and localhost: a bind only this machine reaches. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h === '::1' || h === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** A Host header value: a host name or address and an optional port, nothing else. */
const hostHeader = z
  .string()
  .min(1)
  .max(300)
  .regex(/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/, 'a Host header value: name[:port]');

/** An origin written as a browser sends it: https://name[:port], no path, no user, no query. */
function originOf(text: string): string | undefined {
  try {
    const url = new URL(text);
    if (url.username || url.password || url.search || url.hash || url.pathname !== '/') return undefined;
    return url.origin;
  } catch {
    return undefined;
  }
}

export const consoleSchema = z
  .object({
    enabled: z
      .boolean()
      .default(true)
      .describe('Serve the browser console (log in with a link from `the-loop console`).'),
    host: z
      .string()
      .min(1)
      .default('127.0.0.1')
      .describe('Address the console listens on. Anything but loopback needs console.publicOrigin (https).'),
    port: z
      .number()
      .int()
      .min(0)
      .max(65535)
      .optional()
      .describe(
        'Port of the console listener: 7702 by default (the gateway has 7701); any free port when server.port is 0 (ephemeral daemons, tests). 0: any free port (`the-loop console` finds it).',
      ),
    publicOrigin: z
      .string()
      .max(300)
      .optional()
      .describe(
        'The https origin people reach the console through (a TLS proxy in front of it), e.g. https://loop.example.org. Required for a non-loopback host; the only origin accepted then.',
      ),
    allowedHosts: z
      .array(hostHeader)
      .max(50)
      .default([])
      .describe(
        'Further Host header values accepted (the defence against DNS rebinding refuses any other). Loopback names and publicOrigin are accepted already.',
      ),
    maxViewersPerSession: z
      .number()
      .int()
      .min(1)
      .max(1000)
      .default(16)
      .describe('Terminal viewers of one session at once; more are refused.'),
    maxViewers: z
      .number()
      .int()
      .min(1)
      .max(10_000)
      .default(256)
      .describe('Terminal viewers across all sessions at once; more are refused.'),
    sessionHours: z
      .number()
      .min(0.1)
      .max(24 * 30)
      .default(12)
      .describe('How long a browser stays logged in after following a login link.'),
  })
  .strict()
  .superRefine((c, ctx) => {
    if (c.publicOrigin !== undefined) {
      const origin = originOf(c.publicOrigin);
      if (!origin?.startsWith('https://')) {
        ctx.addIssue({
          code: 'custom',
          path: ['publicOrigin'],
          message: `must be an https origin with no path (https://name[:port]), not ${JSON.stringify(c.publicOrigin)}`,
        });
      }
    } else if (c.enabled && !isLoopbackHost(c.host)) {
      ctx.addIssue({
        code: 'custom',
        path: ['publicOrigin'],
        message: `console.host ${c.host} is not a loopback address, so console.publicOrigin is required: the https origin people reach the console through (a TLS proxy in front of it). Or bind console.host to 127.0.0.1 and reach it over SSH (ssh -L 7702:127.0.0.1:7702).`,
      });
    }
  })
  .transform((c) => ({
    ...c,
    publicOrigin: c.publicOrigin === undefined ? undefined : originOf(c.publicOrigin),
  }))
  .prefault({});

export type ConsoleConfig = z.output<typeof consoleSchema>;

export const DEFAULT_CONSOLE_PORT = 7702;

/**
 * The port the console binds: the configured one; unset, 7702 — or any free port when the webhook
 * listener itself takes any free port (`serve --port 0`: daemons side by side, as tests run them,
 * must not fight over a fixed console port).
 */
export function consolePort(console: Pick<ConsoleConfig, 'port'>, server: { port: number }): number {
  return console.port ?? (server.port === 0 ? 0 : DEFAULT_CONSOLE_PORT);
}

/**
 * The seed's `routing.webTerminal: { enabled, host, port }` is the console under its first name:
 * moved to `console:` before validation (both given: an error, not a silent choice).
 */
export function applyConsoleAlias(raw: Record<string, unknown>, where: string): void {
  const routing = raw.routing;
  if (!routing || typeof routing !== 'object' || Array.isArray(routing)) return;
  const fields = routing as Record<string, unknown>;
  if (!Object.hasOwn(fields, 'webTerminal')) return;
  if (raw.console !== undefined) {
    throw new LoopError('config-invalid', `${where}: both routing.webTerminal and console are set`, {
      hint: 'routing.webTerminal is the older name of console: keep console: only.',
    });
  }
  const { webTerminal, ...rest } = fields;
  raw.routing = rest;
  raw.console = webTerminal ?? {};
}
