/**
 * Claude Code transcript lines as the engine writes them, for the scan and the watcher: an assistant
 * message once per content block (its id, request id and usage repeated: counted once), user
 * records with tool results (bulk without usage), and the totals a correct import adds up to.
 */

export interface Totals {
  requests: number;
  input: number;
  output: number;
  cacheRead: number;
  cacheCreation: number;
}

export const noTotals = (): Totals => ({ requests: 0, input: 0, output: 0, cacheRead: 0, cacheCreation: 0 });

export function addTotals(a: Totals, b: Totals): Totals {
  return {
    requests: a.requests + b.requests,
    input: a.input + b.input,
    output: a.output + b.output,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheCreation: a.cacheCreation + b.cacheCreation,
  };
}

/** One assistant record (a content block of message `id`). */
export function assistantLine(o: {
  id: string;
  session?: string;
  input?: number;
  output?: number;
  cacheRead?: number;
  cacheCreation?: number;
  text?: string;
  at?: string;
  model?: string;
}): string {
  return JSON.stringify({
    parentUuid: null,
    isSidechain: false,
    message: {
      id: o.id,
      type: 'message',
      role: 'assistant',
      model: o.model ?? 'claude-sonnet-4-5-20250929',
      content: [{ type: 'text', text: o.text ?? 'hello' }],
      usage: {
        input_tokens: o.input ?? 10,
        cache_creation_input_tokens: o.cacheCreation ?? 2,
        cache_read_input_tokens: o.cacheRead ?? 3,
        output_tokens: o.output ?? 5,
      },
    },
    requestId: `req_${o.id}`,
    type: 'assistant',
    uuid: `u-${o.id}-${Math.random().toString(36).slice(2, 8)}`,
    timestamp: o.at ?? new Date().toISOString(),
    sessionId: o.session ?? 'watched-session',
  });
}

export function userLine(text: string, session = 'watched-session'): string {
  return JSON.stringify({
    type: 'user',
    message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: text }] },
    uuid: `u-${Math.random().toString(36).slice(2, 10)}`,
    timestamp: new Date().toISOString(),
    sessionId: session,
  });
}

/**
 * About `bytes` bytes of complete transcript lines: messages `<prefix>-<n>` (two blocks each, both
 * with the usage) between tool results of ~4 KB, and the totals they add once counted once.
 */
export function transcriptBytes(
  bytes: number,
  prefix: string,
  session = 'watched-session',
): { text: string; totals: Totals } {
  const lines: string[] = [];
  const totals = noTotals();
  const filler = 'x'.repeat(4000);
  let size = 0;
  for (let n = 0; size < bytes; n++) {
    const id = `msg_${prefix}_${n}`;
    const usage = { input: 100 + (n % 7), output: 20 + (n % 5), cacheRead: 1000 + n, cacheCreation: 50 };
    const block = [
      assistantLine({ id, session, ...usage, text: 'thinking about it' }),
      assistantLine({ id, session, ...usage, text: 'done' }),
      userLine(filler, session),
    ];
    for (const l of block) {
      lines.push(l);
      size += Buffer.byteLength(l) + 1;
    }
    totals.requests += 1;
    totals.input += usage.input;
    totals.output += usage.output;
    totals.cacheRead += usage.cacheRead;
    totals.cacheCreation += usage.cacheCreation;
  }
  return { text: `${lines.join('\n')}\n`, totals };
}

/** The token totals of a `usage --json` report (or the report store's), as Totals. */
export function reportTotals(report: {
  total: {
    rows: number;
    usage: {
      inputTokens: number;
      outputTokens: number;
      cacheReadTokens: number;
      cacheCreationTokens: number;
    };
  };
}): Totals {
  const u = report.total.usage;
  return {
    requests: report.total.rows,
    input: u.inputTokens,
    output: u.outputTokens,
    cacheRead: u.cacheReadTokens,
    cacheCreation: u.cacheCreationTokens,
  };
}
