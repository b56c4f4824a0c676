import { z } from 'zod';
import { BACKENDS, type ToolName } from './names.js';

/**
 * The connector's tools as data: each one's input and output schema (published to the client as JSON
 * Schema, and checked by the SDK before any handler runs), and all four MCP annotations set
 * explicitly. Bounds are here so an oversized argument is refused before it reaches the gate.
 */

/** The most bytes of text one `send_input` pastes (a larger paste is refused, never cut). */
export const MAX_TEXT = 64 * 1024;
/** The longest command `run_command` takes. */
export const MAX_COMMAND = 16 * 1024;
export const MAX_KEYS = 64;
/** The most lines `read_terminal` returns. */
export const MAX_READ_LINES = 2000;

const target = z
  .string()
  .min(1)
  .max(256)
  .describe(
    'A terminal id from list_terminals (`%12` for a tmux pane, `kitty:7` for a kitty window), or an exact terminal name (a tmux session name: its active pane; a kitty window title).',
  );

const terminalRef = z.object({ id: z.string(), name: z.string() });

const terminalOut = z.object({
  id: z.string(),
  backend: z.enum(BACKENDS),
  name: z.string(),
  label: z.string(),
  title: z.string(),
  command: z.string(),
  cols: z.number().int(),
  rows: z.number().int(),
  active: z.boolean(),
  dead: z.boolean(),
  inMode: z.boolean(),
  alternateScreen: z.boolean(),
  createdAt: z.string().nullable(),
  /** One of the daemon's own agent sessions. */
  agentSession: z.string().nullable(),
});

export interface ToolDef {
  name: ToolName;
  title: string;
  description: string;
  input: z.ZodObject;
  output: z.ZodObject;
  annotations: {
    readOnlyHint: boolean;
    destructiveHint: boolean;
    idempotentHint: boolean;
    openWorldHint: boolean;
  };
  /** Whether the tool acts on one terminal (its `target` is resolved and gated before the handler). */
  targeted: boolean;
}

export const TOOL_DEFS: readonly ToolDef[] = [
  {
    name: 'list_terminals',
    title: 'List terminals',
    description:
      'The terminals this connection is granted (tmux panes, kitty windows): id, name, size, foreground program, and whether each can take input now. Never their environment.',
    input: z.object({ backend: z.enum(BACKENDS).optional().describe('only this backend') }).strict(),
    output: z.object({
      terminals: z.array(terminalOut),
      unavailable: z.array(z.object({ backend: z.enum(BACKENDS), reason: z.string() })),
    }),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    targeted: false,
  },
  {
    name: 'read_terminal',
    title: 'Read a terminal',
    description:
      'The last lines of a terminal as text (escape sequences removed), oldest first; with history, from its scrollback too.',
    input: z
      .object({
        target,
        lines: z
          .number()
          .int()
          .min(1)
          .max(MAX_READ_LINES)
          .default(100)
          .describe('how many lines (default 100)'),
        history: z.boolean().default(false).describe('include the scrollback, not only the screen'),
      })
      .strict(),
    output: z.object({
      terminal: terminalRef,
      lines: z.array(z.string()),
      truncated: z.boolean(),
      cursor: z.object({ x: z.number().int(), y: z.number().int() }).nullable(),
    }),
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    targeted: true,
  },
  {
    name: 'send_input',
    title: 'Send text and keys',
    description:
      'Type into a terminal: `text` is pasted (bracketed when the program asked for it; escape and control sequences removed, newline and tab kept), then each of `keys` is pressed. Keys: (C-|M-|S-)* then Enter, Escape, Tab, BSpace, Space, Up, Down, Left, Right, Home, End, PageUp, PageDown, Insert, Delete, F1..F12 or one of a-z 0-9 — anything else is refused (E_UNKNOWN_KEY), never typed. Refused when the pane is in copy mode or dead (E_PANE_BUSY).',
    input: z
      .object({
        target,
        text: z.string().max(MAX_TEXT).optional().describe('text to paste'),
        keys: z
          .array(z.string().max(32))
          .max(MAX_KEYS)
          .optional()
          .describe('keys to press after the text, e.g. ["Enter"], ["C-c"]'),
      })
      .strict(),
    output: z.object({ terminal: terminalRef, textBytes: z.number().int(), keys: z.number().int() }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    targeted: true,
  },
  {
    name: 'run_command',
    title: 'Run a command',
    description:
      "Run a shell command and return its real exit status and output. By default in a new pane of the target's session, closed afterwards (keep: true keeps it); where: pane types it into the target itself, only at a known shell prompt and only when the grant allows. Stopped and reported (E_TIMEOUT) after timeoutSeconds.",
    input: z
      .object({
        target,
        command: z.string().min(1).max(MAX_COMMAND).describe('the command line, run by the shell'),
        where: z.enum(['new-pane', 'pane']).default('new-pane'),
        timeoutSeconds: z
          .number()
          .int()
          .min(1)
          .max(3600)
          .optional()
          .describe("default: 30, or the grant's limit if lower"),
        maxLines: z
          .number()
          .int()
          .min(1)
          .max(10_000)
          .optional()
          .describe("output lines returned (the last ones); default: 200, or the grant's limit if lower"),
        keep: z.boolean().default(false).describe('keep the new pane after the command'),
      })
      .strict(),
    output: z.object({
      terminal: terminalRef,
      exitStatus: z.number().int().nullable(),
      signal: z.number().int().nullable(),
      output: z.string(),
      truncated: z.boolean(),
      ranIn: z.string(),
      kept: z.boolean(),
      durationMs: z.number(),
    }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    targeted: true,
  },
  {
    name: 'close_terminal',
    title: 'Close a terminal',
    description:
      "Close a terminal (a tmux pane: its session goes with its last pane; a kitty window). Never one of the daemon's own agent sessions.",
    input: z.object({ target }).strict(),
    output: z.object({ closed: terminalRef }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    targeted: true,
  },
];
