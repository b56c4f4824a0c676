import type { z as Z } from 'zod';
import { lazily } from '../../os/lazy-zod.js';

/**
 * The lines `bin/the-loop-hook.js` appends to a session's events file, read back as typed events.
 * Pure: text in, values out. Payloads are untrusted: every field read is validated, a field of the
 * wrong type is dropped (and reported), never trusted. The hook keeps only the fields read here
 * (ids, paths, one-word values, flags): free text Claude Code passes it — the prompt,
 * `last_assistant_message`, tool input and output — never reaches the file (a model that echoes a
 * key would leave it there, and the hook cannot mask what it must not know).
 *
 * Payload fields observed with Claude Code 2.1.197 (headless and TUI), on top of the common
 * `session_id`, `transcript_path`, `cwd`, `hook_event_name` (and, after the first prompt,
 * `prompt_id`, `permission_mode`, `effort`):
 * - SessionStart: `source` (startup | resume | clear | compact)
 * - UserPromptSubmit: `prompt`, `prompt_id`
 * - PreToolUse: `tool_name`, `tool_input`, `tool_use_id`; PostToolUse adds `tool_response`, `duration_ms`
 * - Stop: `last_assistant_message`, `stop_hook_active`, `background_tasks`, `session_crons`
 * - StopFailure: `error` (e.g. `server_error`), `last_assistant_message` (the API error text)
 * - SessionEnd: `reason` (clear | resume | logout | prompt_input_exit | other | bypass_permissions_disabled)
 */

/** The events this module reads fields from; any other hook event is tolerated as `other`. */
export const KNOWN_HOOK_EVENTS = [
  'SessionStart',
  'UserPromptSubmit',
  'PreToolUse',
  'PostToolUse',
  'Stop',
  'StopFailure',
  'SessionEnd',
] as const;
export type KnownHookEventName = (typeof KNOWN_HOOK_EVENTS)[number];

interface HookEventBase {
  /** When the hook process received the event (ISO 8601, the hook's clock). */
  receivedAt: string;
  sessionId: string | undefined;
  transcriptPath: string | undefined;
  cwd: string | undefined;
  /** The payload was over the hook's size limit: only the event name and session id survived. */
  truncated: boolean;
  /** Byte offset just after this event's line: persist it to resume reading after this event. */
  end: number;
  /** The hook payload as recorded (its kept fields; untrusted); undefined when truncated. */
  payload: Readonly<Record<string, unknown>> | undefined;
}

export type HookEvent =
  | (HookEventBase & { event: 'SessionStart'; source: string | undefined })
  | (HookEventBase & { event: 'UserPromptSubmit'; promptId: string | undefined })
  | (HookEventBase & { event: 'PreToolUse'; tool: ToolFields })
  | (HookEventBase & { event: 'PostToolUse'; tool: ToolFields })
  | (HookEventBase & { event: 'Stop'; stopHookActive: boolean | undefined })
  | (HookEventBase & { event: 'StopFailure'; error: string | undefined })
  | (HookEventBase & { event: 'SessionEnd'; reason: string | undefined })
  /** A hook event this module does not interpret (Notification, PermissionRequest, …). */
  | (HookEventBase & { event: 'other'; name: string })
  /** The hook got stdin it could not parse (or too big to name): only its size is known. */
  | (HookEventBase & { event: 'invalid'; bytes: number | undefined });

/** A tool call's name and id (its input and output are not recorded). */
export interface ToolFields {
  name: string | undefined;
  useId: string | undefined;
}

export type HookEventName = HookEvent['event'];

export type ParsedLine = { ok: true; event: HookEvent; warnings: string[] } | { ok: false; error: string };

/** The envelope the hook writes around each payload, and the fields read: built on the first line parsed. */
const schemas = lazily((z) => ({
  envelope: z.object({
    v: z.literal(1),
    receivedAt: z.string().min(1),
    event: z.string().min(1).max(200),
    sessionId: z.string().optional(),
    payload: z.record(z.string(), z.unknown()).optional(),
    truncated: z.boolean().optional(),
    bytes: z.number().int().nonnegative().optional(),
  }),
  text: z.string(),
  flag: z.boolean(),
}));

/** Read one field of an untrusted payload: absent → undefined; wrong type → undefined + a warning. */
function field<T>(
  payload: Record<string, unknown> | undefined,
  key: string,
  schema: Z.ZodType<T>,
  warnings: string[],
): T | undefined {
  if (payload === undefined || !Object.hasOwn(payload, key)) return undefined;
  const parsed = schema.safeParse(payload[key]);
  if (parsed.success) return parsed.data;
  warnings.push(`hook payload field ${key} has an unexpected type (${typeof payload[key]})`);
  return undefined;
}

const isKnown = (name: string): name is KnownHookEventName =>
  (KNOWN_HOOK_EVENTS as readonly string[]).includes(name);

/** Parse one line (without its `\n`) of an events file. `end` is the byte offset after the line. */
export function parseHookEventLine(line: string, end: number): ParsedLine {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    return { ok: false, error: `not JSON (${line.length} characters)` };
  }
  const { envelope: envelopeSchema, text, flag } = schemas();
  const envelope = envelopeSchema.safeParse(json);
  if (!envelope.success) {
    const issue = envelope.error.issues[0];
    return {
      ok: false,
      error: `not a hook event line (${issue?.path.join('.') || 'line'}: ${issue?.message})`,
    };
  }
  const { receivedAt, event: name, sessionId, payload, truncated, bytes } = envelope.data;
  const warnings: string[] = [];
  const get = <T>(key: string, schema: Z.ZodType<T>) => field(payload, key, schema, warnings);
  const base: HookEventBase = {
    receivedAt,
    sessionId: sessionId ?? get('session_id', text),
    transcriptPath: get('transcript_path', text),
    cwd: get('cwd', text),
    truncated: truncated === true,
    end,
    payload,
  };
  if (name === 'invalid' || name === 'truncated') {
    return { ok: true, event: { ...base, event: 'invalid', bytes }, warnings };
  }
  if (!isKnown(name)) return { ok: true, event: { ...base, event: 'other', name }, warnings };
  const tool = (): ToolFields => ({ name: get('tool_name', text), useId: get('tool_use_id', text) });
  let event: HookEvent;
  switch (name) {
    case 'SessionStart':
      event = { ...base, event: name, source: get('source', text) };
      break;
    case 'UserPromptSubmit':
      event = { ...base, event: name, promptId: get('prompt_id', text) };
      break;
    case 'PreToolUse':
      event = { ...base, event: name, tool: tool() };
      break;
    case 'PostToolUse':
      event = { ...base, event: name, tool: tool() };
      break;
    case 'Stop':
      event = { ...base, event: name, stopHookActive: get('stop_hook_active', flag) };
      break;
    case 'StopFailure':
      event = { ...base, event: name, error: get('error', text) };
      break;
    case 'SessionEnd':
      event = { ...base, event: name, reason: get('reason', text) };
      break;
  }
  return { ok: true, event, warnings };
}

/** What `HookEventsTail.next` waits for: a partial match, or any test of the event. */
export type HookEventMatch =
  | { event?: HookEventName | readonly HookEventName[]; sessionId?: string }
  | ((event: HookEvent) => boolean);

export function matchesHookEvent(match: HookEventMatch, event: HookEvent): boolean {
  if (typeof match === 'function') return match(event);
  if (match.sessionId !== undefined && event.sessionId !== match.sessionId) return false;
  if (match.event === undefined) return true;
  return typeof match.event === 'string' ? event.event === match.event : match.event.includes(event.event);
}
