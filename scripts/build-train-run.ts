/**
 * The project the `run` code cache is trained on (scripts/build-cli.ts): one whole turn, as a person
 * runs one — the app made, recovery, the gateway started, the session claimed and prepared, the
 * engine spawned, its stream read, the turn recorded and reported — so the functions a turn compiles
 * before and after its engine are in the cache. A refused turn (the cache's training before) compiled
 * only the app's construction.
 *
 * The engine is a stand-in for Claude Code written here (a Node script printing its stream-json: an
 * init, a reply, a result with usage); the sandbox as a new config has it (`auto`: bubblewrap where
 * it works, which trains the sandbox's preparation too — ~50 ms less CPU before a sandboxed turn's
 * engine than a cache trained without it; where it does not, the turn runs unsandboxed); the
 * gateway on a port of its own (0), holding a made-up API key as it would a person's (the stand-in
 * never calls the API: nothing goes on the network).
 */
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const FAKE_ENGINE = `#!/usr/bin/env node
const args = process.argv.slice(2);
const at = args.indexOf('--session-id');
const session_id = at >= 0 ? args[at + 1] : 'the-loop-build';
const model = 'claude-opus-4-8';
const usage = { input_tokens: 120, output_tokens: 8, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 };
const out = (event) => process.stdout.write(JSON.stringify(event) + '\\n');
out({ type: 'system', subtype: 'init', session_id, model, cwd: process.cwd(), tools: [], permissionMode: 'bypassPermissions' });
out({ type: 'assistant', session_id, message: { id: 'msg_build_1', type: 'message', role: 'assistant', model, content: [{ type: 'text', text: 'Hello.' }], stop_reason: 'end_turn', usage } });
out({ type: 'result', subtype: 'success', is_error: false, session_id, duration_ms: 5, num_turns: 1, result: 'Hello.', total_cost_usd: 0.0008, usage, modelUsage: { [model]: { inputTokens: 120, outputTokens: 8 } } });
`;

/** Writes the project under `dir`; returns the environment its training commands run with. */
export function turnProject(
  dir: string,
  env: Record<string, string | undefined>,
): Record<string, string | undefined> {
  const root = join(dir, 'turn');
  const work = join(root, 'work');
  mkdirSync(work, { recursive: true });
  const engine = join(root, 'claude');
  writeFileSync(engine, FAKE_ENGINE);
  chmodSync(engine, 0o755);
  const config = join(root, 'config.yaml');
  writeFileSync(
    config,
    [
      'dataDir: data',
      'server: { port: 0 }',
      'gateway: { port: 0 }',
      'sandbox: { mode: auto }',
      `defaults: { engine: claude, cwd: ${JSON.stringify(work)} }`,
      `engines: { claude: { binary: ${JSON.stringify(engine)} } }`,
      '',
    ].join('\n'),
  );
  return { ...env, THE_LOOP_CONFIG: config, ANTHROPIC_API_KEY: 'sk-ant-the-loop-build-not-a-key' };
}
