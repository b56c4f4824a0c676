/**
 * The synthetic Claude Code transcript corpora of `bench:scan` (bench/scan.ts), built once under
 * bench/.out and reused (a marker file names what was built). Deterministic record mix (a seeded
 * PRNG); ids are random bytes. Two shapes:
 *
 * - `standard`: the record mix of real transcripts — user prompts, assistant records (one per content
 *   block, each repeating the message's id, request id and usage: the duplicates ccusage and we must
 *   count once), large tool results, sidechain (subagent) records, and the other record types
 *   (summary, file-history-snapshot, system turn_duration, attachment, queue-operation). Sizes vary
 *   per file (a few KB to several MB). ~1.18 GB in 1,000 files holds ~57,000 requests.
 * - `dense`: a user with a long history of short exchanges — many small assistant records, each
 *   message streamed as exactly two copies (same message id and request id: a text block, then a
 *   tool use), small tool results between them. ~1.14 GB in 1,000 files holds ~400,000 assistant
 *   records, ~200,000 unique requests: the rows, not the bytes, are the work.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export type CorpusShape = 'standard' | 'dense';

// A deterministic PRNG, so the corpus is the same every time it is built.
let seed = 0x2f6b_a1c3;
const rand = () => {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) / 0x1_0000_0000;
};
const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T;
const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
const hex = (n: number) => Array.from({ length: n }, () => '0123456789abcdef'[int(0, 15)]).join('');
export const uuid = () => `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${hex(12)}`;
const WORDS =
  'the a function return value error file test build change import export const let type interface module package config server client request response token cache model session turn engine runner'.split(
    ' ',
  );
export const prose = (n: number) => Array.from({ length: n }, () => pick(WORDS)).join(' ');
const CODE_POOL = Array.from({ length: 64 }, () =>
  Array.from(
    { length: 40 },
    () => `  const ${pick(WORDS)}_${int(0, 999)} = ${pick(WORDS)}(${int(0, 99)}); // ${prose(6)}`,
  ).join('\n'),
);
const code = (bytes: number) => {
  let s = '';
  while (s.length < bytes) s += `${pick(CODE_POOL)}\n`;
  return s.slice(0, bytes);
};
/** Where the PRNG stands once the pool is drawn: the standard corpus starts there (as it always did). */
const SEED_AFTER_POOL = seed;
const MODELS = [
  ['claude-sonnet-4-5-20250929', 0.7],
  ['claude-opus-4-1-20250805', 0.15],
  ['claude-haiku-4-5-20251001', 0.15],
] as const;
const model = () => {
  const r = rand();
  let acc = 0;
  for (const [m, p] of MODELS) {
    acc += p;
    if (r < acc) return m;
  }
  return MODELS[0][0];
};

function session(file: string, project: string, bytes: number, start: number): number {
  const sessionId = uuid();
  const cwd = `/home/dev/${project}`;
  const base = {
    cwd,
    sessionId,
    version: '2.1.197',
    gitBranch: 'main',
    userType: 'external',
    entrypoint: 'cli',
  };
  const lines: string[] = [];
  let size = 0;
  let at = start;
  let parent: string | null = null;
  const push = (record: Record<string, unknown>) => {
    const line = JSON.stringify(record);
    lines.push(line);
    size += line.length + 1;
  };
  push({ type: 'summary', summary: prose(8), leafUuid: uuid() });
  let requests = 0;
  while (size < bytes) {
    at += int(5_000, 600_000);
    const promptId = uuid();
    const userUuid = uuid();
    push({
      type: 'file-history-snapshot',
      messageId: userUuid,
      snapshot: { messageId: userUuid, trackedFileBackups: {}, timestamp: new Date(at).toISOString() },
      isSnapshotUpdate: false,
    });
    push({
      ...base,
      parentUuid: parent,
      isSidechain: false,
      promptId,
      type: 'user',
      message: { role: 'user', content: prose(int(10, 300)) },
      uuid: userUuid,
      timestamp: new Date(at).toISOString(),
    });
    parent = userUuid;
    if (rand() < 0.3)
      push({
        ...base,
        parentUuid: parent,
        isSidechain: false,
        type: 'attachment',
        attachment: { type: 'skill_listing', content: prose(40) },
        uuid: uuid(),
        timestamp: new Date(at).toISOString(),
      });
    const steps = int(1, 6);
    for (let step = 0; step < steps; step++) {
      at += int(1_000, 60_000);
      const sidechain = rand() < 0.1;
      const messageId = `msg_${randomBytes(12).toString('base64url')}`;
      const requestId = `req_${randomBytes(12).toString('base64url')}`;
      const written = rand() < 0.5 ? int(0, 20_000) : 0;
      const usage = {
        input_tokens: int(1, 4000),
        cache_creation_input_tokens: written,
        cache_read_input_tokens: int(0, 150_000),
        output_tokens: int(1, 3000),
        service_tier: 'standard',
        // As Claude Code writes it: the same cache writes, split by lifetime.
        cache_creation: { ephemeral_5m_input_tokens: written, ephemeral_1h_input_tokens: 0 },
        server_tool_use: { web_search_requests: 0, web_fetch_requests: 0 },
      };
      const m = model();
      const blocks: Array<Record<string, unknown>> = [];
      if (rand() < 0.4)
        blocks.push({
          type: 'thinking',
          thinking: prose(int(20, 200)),
          signature: randomBytes(64).toString('base64'),
        });
      blocks.push({ type: 'text', text: prose(int(5, 250)) });
      const tool = step < steps - 1 || rand() < 0.3;
      const toolId = `toolu_${randomBytes(12).toString('base64url')}`;
      if (tool)
        blocks.push({
          type: 'tool_use',
          id: toolId,
          name: pick(['Read', 'Edit', 'Bash', 'Grep', 'Write']),
          input: { file_path: `${cwd}/src/${pick(WORDS)}.ts`, command: prose(6) },
        });
      for (const block of blocks) {
        const id = uuid();
        push({
          ...base,
          parentUuid: parent,
          isSidechain: sidechain,
          message: {
            id: messageId,
            type: 'message',
            role: 'assistant',
            model: m,
            content: [block],
            stop_reason: tool ? 'tool_use' : 'end_turn',
            stop_sequence: null,
            usage,
          },
          requestId,
          type: 'assistant',
          uuid: id,
          timestamp: new Date(at).toISOString(),
        });
        parent = id;
      }
      requests += 1;
      if (tool) {
        const output = code(rand() < 0.15 ? int(20_000, 80_000) : int(200, 6_000));
        const id = uuid();
        push({
          ...base,
          parentUuid: parent,
          isSidechain: sidechain,
          promptId,
          type: 'user',
          message: { role: 'user', content: [{ tool_use_id: toolId, type: 'tool_result', content: output }] },
          uuid: id,
          timestamp: new Date(at + 500).toISOString(),
          toolUseResult: { stdout: output, stderr: '', interrupted: false, isImage: false },
        });
        parent = id;
      }
    }
    push({
      ...base,
      parentUuid: parent,
      isSidechain: false,
      type: 'system',
      subtype: 'turn_duration',
      durationMs: int(1000, 90_000),
      uuid: uuid(),
      timestamp: new Date(at).toISOString(),
    });
    if (rand() < 0.2)
      push({
        type: 'queue-operation',
        operation: 'enqueue',
        timestamp: new Date(at).toISOString(),
        sessionId,
        content: prose(5),
      });
  }
  writeFileSync(file, `${lines.join('\n')}\n`);
  return requests;
}

/**
 * A dense session: short prompts, then steps of one small request each — two streamed copies of
 * the assistant message (its text, then its tool use; the same message id, request id and usage)
 * and a small tool result. About 5.7 KB per request.
 */
function denseSession(file: string, project: string, bytes: number, start: number): number {
  const sessionId = uuid();
  const cwd = `/home/dev/${project}`;
  const base = {
    cwd,
    sessionId,
    version: '2.1.197',
    gitBranch: 'main',
    userType: 'external',
    entrypoint: 'cli',
  };
  const lines: string[] = [];
  let size = 0;
  let at = start;
  let parent: string | null = null;
  const push = (record: Record<string, unknown>) => {
    const line = JSON.stringify(record);
    lines.push(line);
    size += line.length + 1;
  };
  let requests = 0;
  while (size < bytes) {
    at += int(5_000, 300_000);
    const promptId = uuid();
    const userUuid = uuid();
    push({
      ...base,
      parentUuid: parent,
      isSidechain: false,
      promptId,
      type: 'user',
      message: { role: 'user', content: prose(int(5, 40)) },
      uuid: userUuid,
      timestamp: new Date(at).toISOString(),
    });
    parent = userUuid;
    const steps = int(2, 12);
    for (let step = 0; step < steps; step++) {
      at += int(500, 20_000);
      const messageId = `msg_${randomBytes(12).toString('base64url')}`;
      const requestId = `req_${randomBytes(12).toString('base64url')}`;
      const written = rand() < 0.3 ? int(0, 4_000) : 0;
      const usage = {
        input_tokens: int(1, 400),
        cache_creation_input_tokens: written,
        cache_read_input_tokens: int(0, 80_000),
        output_tokens: int(1, 800),
        service_tier: 'standard',
        cache_creation: { ephemeral_5m_input_tokens: written, ephemeral_1h_input_tokens: 0 },
        server_tool_use: { web_search_requests: 0, web_fetch_requests: 0 },
      };
      const m = model();
      const toolId = `toolu_${randomBytes(12).toString('base64url')}`;
      const blocks = [
        { type: 'text', text: prose(int(3, 40)) },
        {
          type: 'tool_use',
          id: toolId,
          name: pick(['Read', 'Edit', 'Bash', 'Grep', 'Write']),
          input: { file_path: `${cwd}/src/${pick(WORDS)}.ts`, command: prose(4) },
        },
      ];
      for (const block of blocks) {
        const id = uuid();
        push({
          ...base,
          parentUuid: parent,
          isSidechain: false,
          message: {
            id: messageId,
            type: 'message',
            role: 'assistant',
            model: m,
            content: [block],
            stop_reason: 'tool_use',
            stop_sequence: null,
            usage,
          },
          requestId,
          type: 'assistant',
          uuid: id,
          timestamp: new Date(at).toISOString(),
        });
        parent = id;
      }
      requests += 1;
      const output = code(int(350, 2_750));
      const id = uuid();
      push({
        ...base,
        parentUuid: parent,
        isSidechain: false,
        promptId,
        type: 'user',
        message: { role: 'user', content: [{ tool_use_id: toolId, type: 'tool_result', content: output }] },
        uuid: id,
        timestamp: new Date(at + 300).toISOString(),
        toolUseResult: { stdout: output, stderr: '', interrupted: false, isImage: false },
      });
      parent = id;
    }
    push({
      ...base,
      parentUuid: parent,
      isSidechain: false,
      type: 'system',
      subtype: 'turn_duration',
      durationMs: int(1000, 60_000),
      uuid: uuid(),
      timestamp: new Date(at).toISOString(),
    });
  }
  writeFileSync(file, `${lines.join('\n')}\n`);
  return requests;
}

/**
 * Build the corpus of `shape` under `dir` (projects/<project>/<session>.jsonl), unless a corpus of
 * that shape and size is there already. Sizes: a long tail — most sessions small, a few large —
 * scaled to `targetMb` (10^6 bytes). Returns the number of unique requests.
 */
export function buildCorpus(dir: string, shape: CorpusShape, targetMb: number, files: number): number {
  // (The standard corpus keeps the marker name it had before the dense one existed.)
  const marker = join(dir, `.built-${shape === 'standard' ? '' : `${shape}-`}${targetMb}mb-${files}files`);
  if (existsSync(marker)) return Number.parseInt(readFileSync(marker, 'utf8'), 10);
  rmSync(dir, { recursive: true, force: true });
  seed = shape === 'standard' ? SEED_AFTER_POOL : 0x5d3e_97b1;
  const t0 = Date.now();
  const target = targetMb * 1e6;
  const weights = Array.from({ length: files }, () => Math.exp(rand() * 4));
  const sum = weights.reduce((a, b) => a + b, 0);
  const start = Date.UTC(2026, 10, 1);
  const write = shape === 'standard' ? session : denseSession;
  let requests = 0;
  for (const [i, w] of weights.entries()) {
    const project = `-home-dev-project-${i % 40}`;
    const projectDir = join(dir, 'projects', project);
    mkdirSync(projectDir, { recursive: true });
    requests += write(
      join(projectDir, `${uuid()}.jsonl`),
      project,
      (w / sum) * target,
      start + int(0, 25) * 86_400_000,
    );
    if (i % 100 === 99) process.stdout.write(`  ${shape} corpus: ${i + 1}/${files} files\r`);
  }
  writeFileSync(marker, String(requests));
  console.log(`built the ${shape} corpus in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  return requests;
}

/** The corpus's files and their total size. */
export function corpusStats(dir: string): { files: string[]; bytes: number } {
  const files: string[] = [];
  let bytes = 0;
  for (const project of readdirSync(join(dir, 'projects'))) {
    for (const name of readdirSync(join(dir, 'projects', project))) {
      const path = join(dir, 'projects', project, name);
      files.push(path);
      bytes += statSync(path).size;
    }
  }
  return { files, bytes };
}
