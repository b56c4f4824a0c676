/**
 * The Claude Code part of bench:prices' corpus: transcripts of today's three Claude models and a
 * made-up one, with the shapes that move a price — cache reads and writes, 1-hour cache writes (the
 * `cache_creation` split), a request over 200k input tokens (long-context rates) — and every message
 * written twice with the same usage (one record per content block), which both tools count once.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Usage } from '../src/core/events.js';

interface Request {
  model: string;
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
  /** Of cacheWrite, written for an hour (absent: no split in the record, as older versions wrote). */
  cacheWrite1h?: number;
}

function requests(): Request[] {
  const out: Request[] = [];
  for (let i = 0; i < 6; i++) {
    const cacheWrite = 4000 + i * 250;
    out.push({
      model: 'claude-opus-4-8',
      input: 2000 + i * 310,
      output: 400 + i * 53,
      cacheRead: 30_000 + i * 1700,
      cacheWrite,
      // Half the requests write their cache for an hour (Claude Code's default for some sessions).
      ...(i % 2 === 0 ? { cacheWrite1h: cacheWrite } : i === 1 ? { cacheWrite1h: 0 } : {}),
    });
  }
  for (let i = 0; i < 5; i++) {
    out.push({
      model: 'claude-sonnet-4-5-20250929',
      input: 1500 + i * 120,
      output: 800 + i * 75,
      cacheRead: 20_000 + i * 900,
      cacheWrite: 2500 + i * 100,
      ...(i === 3 ? { cacheWrite1h: 1000 } : {}),
    });
  }
  // Over 200k input tokens, cache included: every kind at the long-context rate.
  out.push({
    model: 'claude-sonnet-4-5-20250929',
    input: 150_000,
    output: 6000,
    cacheRead: 60_000,
    cacheWrite: 9000,
    cacheWrite1h: 9000,
  });
  for (let i = 0; i < 5; i++) {
    out.push({
      model: 'claude-haiku-4-5-20251001',
      input: 900 + i * 90,
      output: 300 + i * 31,
      cacheRead: 12_000 + i * 400,
      cacheWrite: 1800 + i * 60,
      ...(i < 2 ? { cacheWrite1h: 1800 + i * 60 } : {}),
    });
  }
  for (let i = 0; i < 2; i++)
    out.push({ model: 'claude-imaginary-9-9', input: 700, output: 90, cacheRead: 0, cacheWrite: 0 });
  return out;
}

function usageOf(r: Request): Record<string, unknown> {
  return {
    input_tokens: r.input,
    cache_creation_input_tokens: r.cacheWrite,
    cache_read_input_tokens: r.cacheRead,
    ...(r.cacheWrite1h === undefined
      ? {}
      : {
          cache_creation: {
            ephemeral_5m_input_tokens: r.cacheWrite - r.cacheWrite1h,
            ephemeral_1h_input_tokens: r.cacheWrite1h,
          },
        }),
    output_tokens: r.output,
    service_tier: 'standard',
  };
}

/** A request whose input (cache included) passes 200k tokens: its model, time and usage. */
export interface LongContext {
  model: string;
  at: string;
  usage: Usage;
}

/** Writes the transcripts under `dir` (one session per model), dated just before `now`. */
export function claudeCorpus(
  dir: string,
  now: Date,
): { files: number; requests: number; lines: number; longContext: LongContext[] } {
  mkdirSync(dir, { recursive: true });
  const all = requests();
  const bySession = new Map<string, Request[]>();
  for (const r of all) bySession.set(r.model, [...(bySession.get(r.model) ?? []), r]);
  let lines = 0;
  let n = 0;
  const longContext: LongContext[] = [];
  for (const [model, list] of bySession) {
    const sessionId = `bench-${model.replace(/[^a-z0-9]/g, '')}`.slice(0, 36);
    const records: string[] = [];
    let parent: string | null = null;
    for (const r of list) {
      n += 1;
      const at = new Date(now.getTime() - (all.length - n + 1) * 60_000).toISOString();
      const messageId = `msg_bench_${n}`;
      if (r.input + r.cacheRead + r.cacheWrite > 200_000) {
        longContext.push({
          model,
          at,
          usage: {
            inputTokens: r.input,
            outputTokens: r.output,
            cacheReadTokens: r.cacheRead,
            cacheCreationTokens: r.cacheWrite,
            reasoningTokens: 0,
            ...(r.cacheWrite1h ? { cacheCreation1hTokens: r.cacheWrite1h } : {}),
          },
        });
      }
      // One record per content block (text, then a tool use), each with the message's usage.
      for (const block of [
        { type: 'text', text: 'Working on it.' },
        { type: 'tool_use', id: `toolu_${n}`, name: 'Bash', input: { command: 'true' } },
      ]) {
        const uuid = `u-${n}-${block.type}`;
        records.push(
          JSON.stringify({
            parentUuid: parent,
            isSidechain: false,
            type: 'assistant',
            uuid,
            sessionId,
            timestamp: at,
            cwd: '/bench',
            version: '2.1.197',
            requestId: `req_bench_${n}`,
            message: {
              id: messageId,
              type: 'message',
              role: 'assistant',
              model,
              content: [block],
              usage: usageOf(r),
            },
          }),
        );
        parent = uuid;
      }
    }
    writeFileSync(join(dir, `${sessionId}.jsonl`), `${records.join('\n')}\n`);
    lines += records.length;
  }
  return { files: bySession.size, requests: all.length, lines, longContext };
}
