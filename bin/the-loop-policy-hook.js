#!/usr/bin/env node
// the-loop's merge policy, enforced before a tool runs: `the-loop-policy-hook.js <policy-file>`.
//
// Claude Code runs this as a PreToolUse command hook (the generated `--settings` file of a session,
// see src/acts/hook.ts) with the tool call's JSON on stdin: `tool_name`, `tool_input`, `cwd`. It
// classifies the call into consequential acts (src/acts/classify.ts) and judges each against the
// session's policy (src/acts/decide.ts, read from <policy-file>):
// - every act allowed (or none): exit 0, print nothing — the tool runs;
// - an act denied: exit 2 with `[the-loop policy] <reason>` on stderr — Claude does not run the tool
//   and the agent receives the reason as the tool's error (observed with 2.1.197 headless, also with
//   --dangerously-skip-permissions). The turn's events then show the act `blocked`.
// It fails closed: a policy or tool call it cannot read refuses the tool, with the reason.
// Never reads or records the environment (Claude passes its whole environment, credentials included).
const { closeSync, constants, openSync, readFileSync, writeSync } = require('node:fs');
const { dirname, isAbsolute, join } = require('node:path');

const MARK = '[the-loop policy]';
const MAX_STDIN_BYTES = 8 * 1024 * 1024;

function deny(reason) {
  process.stderr.write(`${MARK} ${reason}\n`);
  process.exit(2);
}

function readStdin() {
  return new Promise((resolve) => {
    const chunks = [];
    let total = 0;
    process.stdin.on('data', (chunk) => {
      total += chunk.length;
      if (total <= MAX_STDIN_BYTES) chunks.push(chunk);
    });
    process.stdin.on('end', () => resolve({ data: Buffer.concat(chunks), total }));
    process.stdin.on('error', () => resolve({ data: Buffer.concat(chunks), total }));
  });
}

/**
 * The refused call's tool_use_id, appended to `refusals.jsonl` beside the policy (one O_APPEND write,
 * 0600, no symlink followed): the audit counts an act `blocked` only for an id found there, never for
 * a tool result that merely says so (an agent can print anything).
 */
function recordRefusal(policyFile, toolUseId) {
  if (typeof toolUseId !== 'string' || !/^[A-Za-z0-9_:.-]{1,200}$/.test(toolUseId)) return;
  try {
    const fd = openSync(
      join(dirname(policyFile), 'refusals.jsonl'),
      constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW,
      0o600,
    );
    try {
      writeSync(fd, `${JSON.stringify({ toolUseId, at: new Date().toISOString() })}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (error) {
    process.stderr.write(`the-loop-policy-hook: could not record the refusal: ${error.message}\n`);
  }
}

async function main() {
  const file = process.argv[2];
  if (process.argv.length !== 3 || typeof file !== 'string' || !isAbsolute(file)) {
    deny('the policy hook was started without its policy file; refusing this tool call');
  }
  let settings;
  try {
    settings = JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    deny('the policy file cannot be read; refusing this tool call');
  }
  const { data, total } = await readStdin();
  if (total > MAX_STDIN_BYTES) deny(`the tool call (${total} bytes) is too large to check`);
  let call;
  try {
    call = JSON.parse(data.toString('utf8'));
  } catch {
    deny('the tool call is not JSON; refusing it');
  }
  if (!call || typeof call !== 'object' || typeof call.tool_name !== 'string') {
    deny('the tool call names no tool; refusing it');
  }
  const [{ classifyToolUse }, { decide }, { currentBranchOf }] = await Promise.all([
    import('../dist/acts/classify.js'),
    import('../dist/acts/decide.js'),
    import('../dist/acts/audit.js'),
  ]);
  const cwd = typeof call.cwd === 'string' && isAbsolute(call.cwd) ? call.cwd : settings.workspace;
  const ctx = {
    cwd,
    workspace: settings.workspace,
    protectedBranches: settings.policy.protectedBranches,
    currentBranch: cwd ? currentBranchOf(cwd) : undefined,
  };
  const denied = [];
  for (const act of classifyToolUse({ name: call.tool_name, input: call.tool_input }, ctx)) {
    const verdict = decide(act, settings.policy);
    if (verdict.verdict === 'deny')
      denied.push(`${verdict.reason} (${act.kind}: ${act.command.slice(0, 200)})`);
  }
  if (denied.length > 0) {
    recordRefusal(file, call.tool_use_id);
    deny(`${denied.join('; ')}. Ask a person to do it, or do something else.`);
  }
  process.exit(0);
}

main().catch((error) =>
  deny(
    `the policy check failed (${error instanceof Error ? error.message : String(error)}); refusing this tool call`,
  ),
);
