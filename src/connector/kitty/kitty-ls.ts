import { basename } from 'node:path';
import { z } from 'zod';
import { sanitizeLine } from '../../core/text.js';
import type { Terminal } from '../backend.js';
import { visibleName } from '../resolve.js';

/**
 * `kitty @ ls` parsed into terminals. kitty lists every window with the full environment its program
 * was started with (tokens, keys, a canary): the schema names the one variable it reads (KITTY_PID)
 * and zod drops every other key at parse time, so no environment value outlives this function.
 * Unknown fields of newer kitty versions are tolerated (and dropped the same way).
 */

const processSchema = z.object({
  cmdline: z.array(z.string()).default([]),
});

const windowSchema = z.object({
  id: z.number().int().nonnegative(),
  title: z.string().default(''),
  pid: z.number().int().nullable().optional(),
  cwd: z.string().default(''),
  cmdline: z.array(z.string()).default([]),
  columns: z.number().int().default(0),
  lines: z.number().int().default(0),
  is_focused: z.boolean().default(false),
  foreground_processes: z.array(processSchema).default([]),
  // Only KITTY_PID: kitty sets it itself after merging `launch --env`, so a window cannot forge it.
  env: z.object({ KITTY_PID: z.string().optional() }).optional(),
});

const tabSchema = z.object({
  id: z.number().int().nonnegative(),
  title: z.string().default(''),
  windows: z.array(windowSchema).default([]),
});

const osWindowSchema = z.object({
  id: z.number().int().nonnegative(),
  tabs: z.array(tabSchema).default([]),
});

const lsSchema = z.array(osWindowSchema);

/** One kitty window as listed, with what the backend needs beyond the port's `Terminal`. */
export interface KittyWindow {
  terminal: Terminal;
  windowId: number;
  /** The kitty process serving the address (from KITTY_PID), or null when kitty did not say. */
  kittyPid: number | null;
  /** The window's working directory as kitty reports it (for `run`'s new window). */
  cwd: string;
}

export const terminalId = (windowId: number): string => `kitty:${windowId}`;

/** The window id in a canonical `kitty:<n>` id, or null for anything else. */
export function windowIdOf(id: string): number | null {
  const m = /^kitty:(\d{1,9})$/.exec(id);
  return m ? Number(m[1]) : null;
}

export const identityOf = (kittyPid: number | null, windowId: number): string =>
  `${kittyPid ?? 'unknown'}/${windowId}`;

function foregroundCommand(window: z.infer<typeof windowSchema>): string {
  const argv0 = window.foreground_processes[0]?.cmdline[0] ?? window.cmdline[0] ?? '';
  return sanitizeLine(basename(argv0), 120);
}

/**
 * The kitty pid, from the first window that carries it: one address is one kitty process, so every
 * window of the listing says the same.
 */
function kittyPidOf(data: z.infer<typeof lsSchema>): number | null {
  for (const os of data)
    for (const tab of os.tabs)
      for (const w of tab.windows) {
        const pid = Number(w.env?.KITTY_PID);
        if (Number.isInteger(pid) && pid > 0) return pid;
      }
  return null;
}

/** Parse `kitty @ ls` output; throws on output that is not a kitty listing. */
export function parseLs(stdout: string): KittyWindow[] {
  const data = lsSchema.parse(JSON.parse(stdout));
  const kittyPid = kittyPidOf(data);
  const out: KittyWindow[] = [];
  for (const os of data) {
    for (const tab of os.tabs) {
      for (const w of tab.windows) {
        // Titles are set by programs: shown, never trusted, so no control sequence survives them.
        const title = sanitizeLine(w.title, 300);
        out.push({
          windowId: w.id,
          kittyPid,
          cwd: w.cwd,
          terminal: {
            id: terminalId(w.id),
            backend: 'kitty',
            // What grants match: the title with its invisible characters spelled out.
            name: visibleName(w.title).slice(0, 300),
            identity: identityOf(kittyPid, w.id),
            label: `${sanitizeLine(tab.title, 300)} / ${w.id}`,
            title,
            command: foregroundCommand(w),
            cols: w.columns,
            rows: w.lines,
            active: w.is_focused,
            // kitty 0.26's listing says nothing of these: a window whose program exited is gone
            // (unless held), and the screen mode is not reported.
            dead: false,
            inMode: false,
            alternateScreen: false,
            createdAt: null,
          },
        });
      }
    }
  }
  return out;
}
