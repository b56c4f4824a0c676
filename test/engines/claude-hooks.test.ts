/**
 * Claude Code hooks for the tmux runner: the generated settings, the forwarder `bin/the-loop-hook.js`
 * (run exactly as Claude runs it: `/bin/sh -c <command>` with the payload on stdin), `HookEventsTail`,
 * and the real Claude Code CLI (headless) against the mock Anthropic API firing those hooks.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import {
  appendFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  claudeHookCommand,
  claudeHookSettings,
  DEFAULT_HOOK_EVENTS,
  writeSettingsFile,
} from '../../src/engines/claude-hooks.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import type { HookEvent } from '../../src/runners/tmux/claude-hook-events.js';
import { HookEventsTail } from '../../src/runners/tmux/hook-events-tail.js';
import { prepareClaudeHome } from '../fixtures/engine-homes/claude.js';
import { startAnthropicMock } from '../fixtures/mock-apis/anthropic.js';
import type { MockApi } from '../fixtures/mock-apis/types.js';
import { engineRunner } from './run-engine.js';

const HOOK = fileURLToPath(new URL('../../bin/the-loop-hook.js', import.meta.url));
const CLAUDE_BIN = fileURLToPath(new URL('../../node_modules/.bin/claude', import.meta.url));

const roots: string[] = [];
function scratch(): string {
  const root = mkdtempSync(join(tmpdir(), 'the-loop-hooks-'));
  roots.push(root);
  return root;
}
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

interface ShResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const children = new Set<ChildProcess>();
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
});

/** Run a hook command the way Claude Code does on POSIX (`spawn(command, { shell: true })`). */
function runSh(command: string, stdin: string | Buffer, cwd: string): Promise<ShResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('/bin/sh', ['-c', command], {
      cwd,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    children.add(child);
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
    });
    child.stdin.on('error', () => {});
    child.stdin.end(stdin);
    child.on('error', reject);
    child.on('close', (code) => {
      children.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

function lines(file: string): Array<Record<string, unknown>> {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

const payload = (event: string, sessionId: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    session_id: sessionId,
    transcript_path: '/tmp/t.jsonl',
    cwd: '/tmp',
    hook_event_name: event,
    ...extra,
  });

describe('claude hook settings', () => {
  it('registers the forwarder for the turn events, with the shape Claude Code validates', () => {
    const settings = claudeHookSettings({
      node: '/usr/bin/node',
      hookScript: '/opt/the-loop/bin/the-loop-hook.js',
      eventsFile: '/var/lib/the-loop/s/events.jsonl',
    });
    const command = "'/usr/bin/node' '/opt/the-loop/bin/the-loop-hook.js' '/var/lib/the-loop/s/events.jsonl'";
    const entry = [{ hooks: [{ type: 'command', command, timeout: 30 }] }];
    expect(settings).toEqual({
      hooks: {
        SessionStart: entry,
        UserPromptSubmit: entry,
        Stop: entry,
        StopFailure: entry,
        SessionEnd: entry,
        Notification: entry,
      },
      skipDangerousModePermissionPrompt: true,
    });
    expect(Object.keys(settings.hooks)).toEqual([...DEFAULT_HOOK_EVENTS]);
  });

  it('gives tool events a match-all matcher and refuses unknown event names', () => {
    const settings = claudeHookSettings({
      node: '/n',
      hookScript: '/h.js',
      eventsFile: '/e',
      events: ['PreToolUse', 'PostToolUse', 'Stop'],
    });
    expect(settings.hooks.PreToolUse?.[0]?.matcher).toBe('*');
    expect(settings.hooks.PostToolUse?.[0]?.matcher).toBe('*');
    expect(settings.hooks.Stop?.[0]).not.toHaveProperty('matcher');
    expect(() =>
      claudeHookSettings({ node: '/n', hookScript: '/h.js', eventsFile: '/e', events: ['Stopp'] }),
    ).toThrow(/unknown Claude Code hook event "Stopp"/);
  });

  it('refuses paths with a newline or NUL, and relative paths', () => {
    const ok = { node: '/n', hookScript: '/h.js', eventsFile: '/e' };
    expect(() => claudeHookCommand({ ...ok, eventsFile: '/tmp/a\ntouch /tmp/x' })).toThrow(/newline or NUL/);
    expect(() => claudeHookCommand({ ...ok, hookScript: '/tmp/a\0b' })).toThrow(/newline or NUL/);
    expect(() => claudeHookCommand({ ...ok, node: '/tmp/a\rb' })).toThrow(/newline or NUL/);
    expect(() => claudeHookCommand({ ...ok, node: 'node' })).toThrow(/absolute path/);
    expect(() => claudeHookCommand({ ...ok, eventsFile: 'events.jsonl' })).toThrow(/absolute path/);
  });

  it('writes the settings file 0600 and replaces it whole', () => {
    const dir = join(scratch(), 'session');
    const settings = claudeHookSettings({ node: '/n', hookScript: '/h.js', eventsFile: '/e' });
    const path = writeSettingsFile(dir, settings);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual(settings);
    const again = writeSettingsFile(dir, { ...settings, hooks: {} });
    expect(again).toBe(path);
    expect(JSON.parse(readFileSync(path, 'utf8')).hooks).toEqual({});
    expect(readdirSync(dir)).toEqual(['claude-settings.json']);
  });
});

describe('the forwarder run through /bin/sh -c', () => {
  it('quotes hostile paths: appends to the right file and runs nothing else', async () => {
    const root = scratch();
    const cwd = join(root, 'cwd');
    mkdirSync(cwd);
    const hostile = `a b 'q' "dq" $(touch pwned1) \`touch pwned2\` ; touch pwned3 ; '; touch pwned4; ' $HOME \\`;
    const dir = join(root, hostile);
    mkdirSync(dir);
    // Claude runs whatever paths we give it; make every one of the three hostile.
    const node = join(dir, `no'de $(touch pwned5)`);
    symlinkSync(process.execPath, node);
    const script = join(dir, `ho'ok \`touch pwned6\`.js`);
    symlinkSync(HOOK, script);
    const eventsFile = join(dir, `ev'ents $(touch pwned7) ; touch pwned8 '.jsonl`);
    const command = claudeHookCommand({ node, hookScript: script, eventsFile });

    const r = await runSh(command, payload('Stop', 's-1', { last_assistant_message: 'done' }), cwd);
    expect(r).toEqual({ code: 0, stdout: '', stderr: '' });
    const recorded = lines(eventsFile);
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ v: 1, event: 'Stop', sessionId: 's-1' });
    expect(statSync(eventsFile).mode & 0o777).toBe(0o600);
    // Nothing ran: no stray files anywhere a command substitution could have written them.
    expect(readdirSync(cwd)).toEqual([]);
    expect(readdirSync(dir).sort()).toEqual(
      [node, script, eventsFile].map((p) => p.slice(dir.length + 1)).sort(),
    );
    expect(readdirSync(root).sort()).toEqual(['cwd', hostile].sort());
  });

  it('writes one envelope line per event, with only the payload fields the daemon reads', async () => {
    const root = scratch();
    const eventsFile = join(root, 'events.jsonl');
    const command = claudeHookCommand({ node: process.execPath, hookScript: HOOK, eventsFile });
    const prompt = 'fix it\nplease "now" \u001b[201~ ünïcödé';
    const r = await runSh(command, payload('UserPromptSubmit', 's-2', { prompt, prompt_id: 'p-1' }), root);
    expect(r).toEqual({ code: 0, stdout: '', stderr: '' });
    const [line] = lines(eventsFile);
    expect(Object.keys(line ?? {})).toEqual(['v', 'receivedAt', 'event', 'sessionId', 'payload']);
    expect(line?.payload).toEqual({
      session_id: 's-2',
      transcript_path: '/tmp/t.jsonl',
      cwd: '/tmp',
      hook_event_name: 'UserPromptSubmit',
      prompt_id: 'p-1',
    });
    expect(Number.isNaN(Date.parse(String(line?.receivedAt)))).toBe(false);
  });

  it('records no free text: what a model echoes (a key) has no field to land in', async () => {
    const root = scratch();
    const eventsFile = join(root, 'events.jsonl');
    const command = claudeHookCommand({ node: process.execPath, hookScript: HOOK, eventsFile });
    const key = `sk-ant-canary-${randomUUID()}`;
    const said = `the key is ${key}`;
    const hostile: Array<[string, Record<string, unknown>]> = [
      ['Stop', { last_assistant_message: said, stop_hook_active: false }],
      ['StopFailure', { error: 'server_error', last_assistant_message: said }],
      ['UserPromptSubmit', { prompt: said, prompt_id: 'p-1' }],
      ['PreToolUse', { tool_name: 'Bash', tool_input: { command: `echo ${key}` }, tool_use_id: 't-1' }],
      ['PostToolUse', { tool_name: 'Bash', tool_response: { stdout: key }, tool_use_id: 't-1' }],
      ['Notification', { notification_type: 'idle_prompt', message: `line one\n${said}` }],
      ['Stop', { message: said }],
      // Kept fields of the wrong shape are dropped, not kept: a sentence is not an error kind or an id.
      ['StopFailure', { error: said, session_id: said, cwd: said, transcript_path: `/t/${key}\n` }],
    ];
    for (const [event, extra] of hostile) {
      expect(await runSh(command, payload(event, 's-3', extra), root)).toEqual({
        code: 0,
        stdout: '',
        stderr: '',
      });
    }
    const text = readFileSync(eventsFile, 'utf8');
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(-12));
    const recorded = lines(eventsFile);
    expect(recorded.map((l) => l.event)).toEqual(hostile.map(([event]) => event));
    expect(recorded[1]?.payload).toMatchObject({ error: 'server_error' });
    expect(recorded[3]?.payload).toMatchObject({ tool_name: 'Bash', tool_use_id: 't-1' });
    expect(recorded[7]?.payload).toEqual({ hook_event_name: 'StopFailure' });
    // The permission prompt's own words are kept for Notification (one line), nowhere else.
    const note = payload('Notification', 's-3', {
      notification_type: 'permission_prompt',
      message: 'Claude needs your permission',
    });
    await runSh(command, note, root);
    expect(lines(eventsFile).at(-1)?.payload).toMatchObject({ message: 'Claude needs your permission' });
  });

  it('keeps 50 concurrent invocations as 50 intact lines', async () => {
    const root = scratch();
    const eventsFile = join(root, 'events.jsonl');
    const command = claudeHookCommand({ node: process.execPath, hookScript: HOOK, eventsFile });
    // Each line is above PIPE_BUF and a page (two long paths): interleaving would show as broken JSON.
    const big = 'x'.repeat(4000);
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        runSh(
          command,
          payload('PostToolUse', `s-${i}`, { transcript_path: `/${i}:${big}`, cwd: `/${big}` }),
          root,
        ),
      ),
    );
    expect(results.every((r) => r.code === 0 && r.stdout === '')).toBe(true);
    const recorded = lines(eventsFile);
    expect(recorded).toHaveLength(50);
    expect(new Set(recorded.map((l) => l.sessionId)).size).toBe(50);
    for (const l of recorded) {
      const i = String(l.sessionId).slice(2);
      expect(l.payload).toMatchObject({ transcript_path: `/${i}:${big}`, cwd: `/${big}` });
    }
  });

  it('records invalid stdin by its size only, and exits 0', async () => {
    const root = scratch();
    const eventsFile = join(root, 'events.jsonl');
    const command = claudeHookCommand({ node: process.execPath, hookScript: HOOK, eventsFile });
    const secretish = 'not json {"prompt": "sk-ant-do-not-record"';
    for (const input of [secretish, '[1,2,3]', 'null', '']) {
      expect(await runSh(command, input, root)).toEqual({ code: 0, stdout: '', stderr: '' });
    }
    const recorded = lines(eventsFile);
    expect(recorded.map((l) => [l.event, l.bytes])).toEqual([
      ['invalid', Buffer.byteLength(secretish)],
      ['invalid', 7],
      ['invalid', 4],
      ['invalid', 0],
    ]);
    expect(readFileSync(eventsFile, 'utf8')).not.toContain('do-not-record');
  });

  it('records oversized stdin as a truncated marker that still names a Stop', async () => {
    const root = scratch();
    const eventsFile = join(root, 'events.jsonl');
    const command = claudeHookCommand({ node: process.execPath, hookScript: HOOK, eventsFile });
    const huge = payload('Stop', 's-big', { last_assistant_message: 'y'.repeat(9 * 1024 * 1024) });
    const garbage = Buffer.alloc(9 * 1024 * 1024, 0x7b);
    expect(await runSh(command, huge, root)).toEqual({ code: 0, stdout: '', stderr: '' });
    expect(await runSh(command, garbage, root)).toEqual({ code: 0, stdout: '', stderr: '' });
    const recorded = lines(eventsFile);
    expect(recorded.map(({ receivedAt: _, ...rest }) => rest)).toEqual([
      { v: 1, event: 'Stop', sessionId: 's-big', truncated: true, bytes: Buffer.byteLength(huge) },
      { v: 1, event: 'truncated', truncated: true, bytes: garbage.length },
    ]);
    expect(statSync(eventsFile).size).toBeLessThan(1000);
    const tail = new HookEventsTail(eventsFile);
    const stop = await tail.next({ event: 'Stop', sessionId: 's-big' }, { timeoutMs: 5000 });
    expect(stop.ok && stop.event).toMatchObject({ event: 'Stop', truncated: true, payload: undefined });
    tail.close();
  });

  it('never fails the engine: a bad events path or an unwritable file still exits 0 without stdout', async () => {
    const root = scratch();
    const relative = `'${process.execPath}' '${HOOK}' 'events.jsonl'`;
    const missingDir = claudeHookCommand({
      node: process.execPath,
      hookScript: HOOK,
      eventsFile: join(root, 'no-such-dir', 'events.jsonl'),
    });
    const noArgs = `'${process.execPath}' '${HOOK}'`;
    for (const command of [relative, missingDir, noArgs]) {
      const r = await runSh(command, payload('Stop', 's'), root);
      expect(r.code).toBe(0);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^the-loop-hook: /);
    }
    expect(readdirSync(root)).toEqual([]);
  });
});

describe('HookEventsTail', () => {
  const envelope = (event: string, sessionId: string, extra: Record<string, unknown> = {}) =>
    `${JSON.stringify({
      v: 1,
      receivedAt: new Date().toISOString(),
      event,
      sessionId,
      payload: { session_id: sessionId, hook_event_name: event, ...extra },
    })}\n`;

  it('waits for a file that does not exist yet and for lines written in pieces', async () => {
    const file = join(scratch(), 'events.jsonl');
    const tail = new HookEventsTail(file, { pollMs: 20 });
    const line = envelope('SessionStart', 'abc', { source: 'startup', transcript_path: '/t/abc.jsonl' });
    setTimeout(() => appendFileSync(file, line.slice(0, 30)), 50);
    setTimeout(() => appendFileSync(file, line.slice(30)), 150);
    const r = await tail.next({ event: 'SessionStart', sessionId: 'abc' }, { timeoutMs: 5000 });
    expect(r.ok).toBe(true);
    expect(r.ok && r.event).toMatchObject({
      event: 'SessionStart',
      sessionId: 'abc',
      source: 'startup',
      transcriptPath: '/t/abc.jsonl',
      end: Buffer.byteLength(line),
    });
    expect(tail.offset).toBe(Buffer.byteLength(line));
    tail.close();
  });

  it('skips foreign sessions and bad lines with a warning, reads typed fields, resumes from an offset', async () => {
    const file = join(scratch(), 'events.jsonl');
    const sink = memorySink();
    const logger = createLogger({ level: 'debug', sinks: [sink] });
    const seen: HookEvent[] = [];
    const content = [
      envelope('Stop', 'foreign', { last_assistant_message: 'not ours', stop_hook_active: 'no' }),
      'garbage {\n',
      '{"v":2,"event":"Stop"}\n',
      '\r\n',
      envelope('Notification', 'mine', { notification_type: 'idle_prompt' }),
      envelope('UserPromptSubmit', 'mine', { prompt: 42, prompt_id: 'p-1' }),
      envelope('PreToolUse', 'mine', { tool_name: 'Bash', tool_input: { command: 'ls' }, tool_use_id: 't1' }),
      envelope('Stop', 'mine', { last_assistant_message: 'ours', stop_hook_active: false }),
      envelope('SessionEnd', 'mine', { reason: 'other' }),
    ].join('');
    writeFileSync(file, content);
    const tail = new HookEventsTail(file, { logger, onEvent: (e) => seen.push(e) });
    const prompt = await tail.next({ event: 'UserPromptSubmit', sessionId: 'mine' }, { timeoutMs: 2000 });
    expect(prompt.ok && prompt.event).toMatchObject({ promptId: 'p-1' });
    // Free text is not read, even from a line written by an older hook that kept it.
    expect(prompt.ok && 'prompt' in prompt.event).toBe(false);
    const stop = await tail.next({ event: ['Stop', 'StopFailure'], sessionId: 'mine' }, { timeoutMs: 2000 });
    expect(stop.ok && stop.event).toMatchObject({ event: 'Stop', stopHookActive: false });
    expect(stop.ok && 'lastAssistantMessage' in stop.event).toBe(false);
    expect(seen.map((e) => `${e.event}:${e.sessionId}`)).toEqual([
      'Stop:foreign',
      'other:mine',
      'UserPromptSubmit:mine',
      'PreToolUse:mine',
      'Stop:mine',
    ]);
    const pre = seen[3];
    expect(pre?.event === 'PreToolUse' && pre.tool).toEqual({ name: 'Bash', useId: 't1' });
    const warnings = sink.lines.map((l) => JSON.parse(l) as { level: string; msg: string });
    expect(warnings.filter((w) => w.msg === 'skipped a bad hook event line')).toHaveLength(2);
    expect(warnings.some((w) => /field stop_hook_active has an unexpected type/.test(w.msg))).toBe(true);
    // A new tail from the persisted offset picks up exactly where this one stopped.
    const offset = tail.offset;
    tail.close();
    const resumed = new HookEventsTail(file, { offset });
    const end = await resumed.next(() => true, { timeoutMs: 2000 });
    expect(end.ok && end.event).toMatchObject({ event: 'SessionEnd', reason: 'other' });
    expect(resumed.offset).toBe(Buffer.byteLength(content));
    resumed.close();
  });

  it('skips an over-long line and goes on', async () => {
    const file = join(scratch(), 'events.jsonl');
    const sink = memorySink();
    writeFileSync(file, `${'z'.repeat(5000)}\n${envelope('Stop', 's')}`);
    const tail = new HookEventsTail(file, {
      maxLineBytes: 1000,
      logger: createLogger({ level: 'warn', sinks: [sink] }),
    });
    const r = await tail.next({ event: 'Stop' }, { timeoutMs: 2000 });
    expect(r.ok).toBe(true);
    expect(sink.lines.join('')).toContain('skipped an over-long hook event line');
    tail.close();
  });

  it('times out, aborts and closes as values', async () => {
    const file = join(scratch(), 'events.jsonl');
    writeFileSync(file, '');
    const tail = new HookEventsTail(file, { pollMs: 20 });
    expect(await tail.next({ event: 'Stop' }, { timeoutMs: 100 })).toEqual({ ok: false, reason: 'timeout' });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    expect(await tail.next({ event: 'Stop' }, { signal: controller.signal })).toEqual({
      ok: false,
      reason: 'aborted',
    });
    const waiting = tail.next({ event: 'Stop' });
    await expect(tail.next({ event: 'Stop' })).rejects.toThrow(/already waiting/);
    tail.close();
    expect(await waiting).toEqual({ ok: false, reason: 'closed' });
    expect(Reflect.get(tail, 'watcher')).toBeUndefined();
    expect(await tail.next({ event: 'Stop' })).toEqual({ ok: false, reason: 'closed' });
  });

  it('leaves no timer behind after close (checked in a clean process)', async () => {
    const file = join(scratch(), 'events.jsonl');
    const source = fileURLToPath(new URL('../../src/runners/tmux/hook-events-tail.ts', import.meta.url));
    const script = `
      import { HookEventsTail } from ${JSON.stringify(source)};
      const live = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
      const before = live();
      const tail = new HookEventsTail(${JSON.stringify(file)}, { pollMs: 20 });
      const waiting = tail.next({ event: 'Stop' }, { timeoutMs: 60_000 });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const during = live();
      tail.close();
      const result = await waiting;
      console.log(JSON.stringify({ before, during, after: live(), result }));
    `;
    const r = await new Promise<ShResult>((resolve, reject) => {
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        cwd: fileURLToPath(new URL('../..', import.meta.url)),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        stdout += d;
      });
      child.stderr.setEncoding('utf8').on('data', (d: string) => {
        stderr += d;
      });
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expect(r.code, r.stderr).toBe(0);
    // During the wait: the poll timer and the timeout; after close: nothing.
    expect(JSON.parse(r.stdout)).toEqual({
      before: 0,
      during: 2,
      after: 0,
      result: { ok: false, reason: 'closed' },
    });
  });

  describe('drain', () => {
    it('returns every complete line now, in order; the offset stops before a partial line', async () => {
      const file = join(scratch(), 'events.jsonl');
      const seen: HookEvent[] = [];
      const first = [
        envelope('SessionStart', 's', { source: 'startup' }),
        envelope('UserPromptSubmit', 's', { prompt: 'typed by a person', prompt_id: 'p-1' }),
        envelope('Stop', 's', { last_assistant_message: 'done' }),
      ].join('');
      const fourth = envelope('SessionEnd', 's', { reason: 'other' });
      writeFileSync(file, first + fourth.slice(0, 25));
      const tail = new HookEventsTail(file, { onEvent: (e) => seen.push(e) });
      const drained = await tail.drain();
      expect(drained.map((e) => e.event)).toEqual(['SessionStart', 'UserPromptSubmit', 'Stop']);
      expect(drained[1]).toMatchObject({ promptId: 'p-1' });
      expect(drained.map((e) => e.end)).toEqual([
        Buffer.byteLength(first.split('\n')[0] as string) + 1,
        Buffer.byteLength(first.split('\n').slice(0, 2).join('\n')) + 1,
        Buffer.byteLength(first),
      ]);
      expect(tail.offset).toBe(Buffer.byteLength(first));
      expect(seen).toEqual(drained);
      // Nothing new: nothing returned, offset unchanged.
      expect(await tail.drain()).toEqual([]);
      expect(tail.offset).toBe(Buffer.byteLength(first));

      // The 4th line completed: only it.
      appendFileSync(file, fourth.slice(25));
      const later = await tail.drain();
      expect(later.map((e) => e.event)).toEqual(['SessionEnd']);
      expect(later[0]).toMatchObject({ reason: 'other', end: Buffer.byteLength(first + fourth) });
      expect(tail.offset).toBe(Buffer.byteLength(first + fourth));
      tail.close();
    });

    it('consumes what it returns: a later next() does not see a drained Stop', async () => {
      const file = join(scratch(), 'events.jsonl');
      const before = envelope('Stop', 's', { stop_hook_active: true });
      writeFileSync(file, before);
      const tail = new HookEventsTail(file, { pollMs: 20 });
      expect((await tail.drain()).map((e) => e.event)).toEqual(['Stop']);
      expect(await tail.next({ event: 'Stop', sessionId: 's' }, { timeoutMs: 150 })).toEqual({
        ok: false,
        reason: 'timeout',
      });
      const after = envelope('Stop', 's', { stop_hook_active: false });
      appendFileSync(file, after);
      const ours = await tail.next({ event: 'Stop', sessionId: 's' }, { timeoutMs: 2000 });
      expect(ours.ok && ours.event).toMatchObject({
        stopHookActive: false,
        end: Buffer.byteLength(before + after),
      });
      tail.close();
    });

    it('a missing file gives []; a file appearing later is read from the start', async () => {
      const file = join(scratch(), 'not-yet.jsonl');
      const tail = new HookEventsTail(file);
      expect(await tail.drain()).toEqual([]);
      expect(tail.offset).toBe(0);
      writeFileSync(file, envelope('SessionStart', 's'));
      expect((await tail.drain()).map((e) => e.event)).toEqual(['SessionStart']);
      tail.close();
    });

    it('after close() gives [] and consumes nothing', async () => {
      const file = join(scratch(), 'events.jsonl');
      writeFileSync(file, envelope('Stop', 's'));
      const tail = new HookEventsTail(file);
      tail.close();
      expect(await tail.drain()).toEqual([]);
      expect(tail.offset).toBe(0);
    });

    it('skips a bad line with a warning and returns the others', async () => {
      const file = join(scratch(), 'events.jsonl');
      const sink = memorySink();
      writeFileSync(
        file,
        [
          envelope('UserPromptSubmit', 's', { prompt_id: 'p-1' }),
          'not json {\n',
          envelope('Stop', 's', { last_assistant_message: 'ok' }),
        ].join(''),
      );
      const tail = new HookEventsTail(file, { logger: createLogger({ level: 'warn', sinks: [sink] }) });
      const drained = await tail.drain();
      expect(drained.map((e) => e.event)).toEqual(['UserPromptSubmit', 'Stop']);
      const warnings = sink.lines.map((l) => JSON.parse(l) as { msg: string });
      expect(warnings.filter((w) => w.msg === 'skipped a bad hook event line')).toHaveLength(1);
      expect(tail.offset).toBe(statSync(file).size);
      tail.close();
    });

    it('while a next() is waiting gives [] and leaves the lines to it', async () => {
      const file = join(scratch(), 'events.jsonl');
      writeFileSync(file, '');
      const tail = new HookEventsTail(file, { pollMs: 20 });
      const waiting = tail.next({ event: 'Stop' }, { timeoutMs: 5000 });
      appendFileSync(file, envelope('Stop', 's'));
      expect(await tail.drain()).toEqual([]);
      const r = await waiting;
      expect(r.ok && r.event.event).toBe('Stop');
      tail.close();
    });
  });
});

describe('real Claude Code CLI (headless) firing the hooks against the mock API', () => {
  const claude = engineRunner(CLAUDE_BIN, 55_000);
  const mocks: MockApi[] = [];
  afterAll(async () => {
    claude.killAll();
    await Promise.all(mocks.map((m) => m.close()));
  });

  async function setUp(script: Parameters<typeof startAnthropicMock>[0], events?: string[]) {
    const root = scratch();
    const cwd = join(root, 'work');
    mkdirSync(cwd);
    const mock = await startAnthropicMock(script);
    mocks.push(mock);
    const home = prepareClaudeHome(root, mock.url);
    const canary = `sk-ant-canary-${randomUUID()}`;
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      ...home.env,
      [home.credentialEnv]: canary,
    };
    const sessionDir = join(root, 'session');
    const eventsFile = join(sessionDir, 'hook-events.jsonl');
    const settings = claudeHookSettings({ node: process.execPath, hookScript: HOOK, eventsFile, events });
    // A probe hook records only whether the credential is visible to hook processes (never its value).
    const probe = join(root, 'probe.txt');
    settings.hooks.SessionStart?.push({
      hooks: [
        {
          type: 'command',
          command: `if [ -n "$ANTHROPIC_API_KEY" ]; then echo key-visible; fi > '${probe}'; echo "dir=$CLAUDE_PROJECT_DIR" >> '${probe}'`,
        },
      ],
    });
    const settingsFile = writeSettingsFile(sessionDir, settings);
    return { root, cwd, env, canary, eventsFile, settingsFile, probe, mock };
  }

  it('fires SessionStart, UserPromptSubmit, Stop and SessionEnd for our session; no secret recorded', async () => {
    const s = await setUp({ script: [{ kind: 'text', text: 'Hello from the mock.' }] });
    const sessionId = randomUUID();
    const prompt = 'Say hello, and "quote" $(this) safely.';
    const run = claude.run({ cwd: s.cwd, env: s.env }, [
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--session-id',
      sessionId,
      '--settings',
      s.settingsFile,
      '--',
      prompt,
    ]);
    const tail = new HookEventsTail(s.eventsFile);
    const mine = (event: HookEvent['event']) => ({ event, sessionId });
    const start = await tail.next(mine('SessionStart'), { timeoutMs: 30_000 });
    expect(start.ok && start.event).toMatchObject({ source: 'startup', cwd: s.cwd });
    const submit = await tail.next(mine('UserPromptSubmit'), { timeoutMs: 30_000 });
    expect(submit.ok && submit.event.event === 'UserPromptSubmit' && submit.event.promptId).toMatch(
      /^[0-9a-f-]{36}$/,
    );
    const stop = await tail.next(mine('Stop'), { timeoutMs: 30_000 });
    expect(stop.ok && stop.event).toMatchObject({ event: 'Stop', stopHookActive: false });
    const transcript = stop.ok ? stop.event.transcriptPath : undefined;
    expect(transcript).toBe(
      join(s.env.CLAUDE_CONFIG_DIR ?? '', 'projects', s.cwd.replaceAll('/', '-'), `${sessionId}.jsonl`),
    );
    const end = await tail.next(mine('SessionEnd'), { timeoutMs: 30_000 });
    expect(end.ok && end.event).toMatchObject({ reason: 'other' });
    tail.close();

    const result = await run;
    expect(result.code, result.stderr).toBe(0);
    // Headless (-p) 2.1.197 may write the transcript only after the Stop hook ran (a text-only first
    // turn had no transcript file yet at Stop): readers must not expect the last record at Stop time.
    expect(readFileSync(String(transcript), 'utf8')).toContain('Hello from the mock.');
    // Claude hands its whole environment, credential included, to hook processes: the forwarder must
    // (and does) record none of it.
    expect(readFileSync(s.probe, 'utf8')).toBe(`key-visible\ndir=${s.cwd}\n`);
    const recorded = readFileSync(s.eventsFile, 'utf8');
    expect(recorded).not.toContain(s.canary);
    // Neither the prompt nor the model's answer is recorded (only ids, paths and kinds).
    expect(recorded).not.toContain('quote');
    expect(recorded).not.toContain('Hello from the mock');
    expect(statSync(s.eventsFile).mode & 0o777).toBe(0o600);
    expect(lines(s.eventsFile).map((l) => l.event)).toEqual([
      'SessionStart',
      'UserPromptSubmit',
      'Stop',
      'SessionEnd',
    ]);
  });

  it('fires PreToolUse and PostToolUse around a Bash tool call', async () => {
    const s = await setUp(
      {
        script: [
          { kind: 'shell', command: 'echo hook-ok' },
          { kind: 'text', text: 'It printed hook-ok.' },
        ],
      },
      [...DEFAULT_HOOK_EVENTS, 'PreToolUse', 'PostToolUse'],
    );
    const sessionId = randomUUID();
    const result = await claude.run({ cwd: s.cwd, env: { ...s.env, IS_SANDBOX: '1' } }, [
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--dangerously-skip-permissions',
      '--session-id',
      sessionId,
      '--settings',
      s.settingsFile,
      '--',
      'Run echo hook-ok.',
    ]);
    expect(result.code, result.stderr).toBe(0);
    const tail = new HookEventsTail(s.eventsFile);
    const pre = await tail.next({ event: 'PreToolUse', sessionId }, { timeoutMs: 5000 });
    const post = await tail.next({ event: 'PostToolUse', sessionId }, { timeoutMs: 5000 });
    const stop = await tail.next({ event: 'Stop', sessionId }, { timeoutMs: 5000 });
    tail.close();
    if (!pre.ok || pre.event.event !== 'PreToolUse') throw new Error('no PreToolUse');
    if (!post.ok || post.event.event !== 'PostToolUse') throw new Error('no PostToolUse');
    expect(pre.event.tool).toEqual({ name: 'Bash', useId: expect.stringMatching(/^toolu_/) });
    expect(post.event.tool).toEqual(pre.event.tool);
    expect(pre.event.payload).toMatchObject({ permission_mode: 'bypassPermissions' });
    expect(stop.ok && stop.event).toMatchObject({ event: 'Stop' });
    // The command, its output and the model's answer stay out of the file.
    expect(readFileSync(s.eventsFile, 'utf8')).not.toContain('hook-ok');
    expect(readFileSync(s.eventsFile, 'utf8')).not.toContain(s.canary);
    expect(lines(s.eventsFile).map((l) => l.event)).toEqual([
      'SessionStart',
      'UserPromptSubmit',
      'PreToolUse',
      'PostToolUse',
      'Stop',
      'SessionEnd',
    ]);
  });

  it('fires StopFailure when the API fails the turn', async () => {
    const s = await setUp({ script: [{ kind: 'error', status: 500, message: 'mock outage' }] });
    const sessionId = randomUUID();
    const result = await claude.run({ cwd: s.cwd, env: s.env }, [
      '-p',
      '--output-format',
      'stream-json',
      '--verbose',
      '--session-id',
      sessionId,
      '--settings',
      s.settingsFile,
      '--',
      'hello',
    ]);
    expect(result.code).toBe(1);
    const tail = new HookEventsTail(s.eventsFile);
    const failure = await tail.next({ event: 'StopFailure', sessionId }, { timeoutMs: 5000 });
    tail.close();
    expect(failure.ok && failure.event).toMatchObject({ error: 'server_error' });
    // The API's error text reaches the turn from the transcript (scrubbed), not from this file.
    expect(readFileSync(s.eventsFile, 'utf8')).not.toContain('mock outage');
    expect(lines(s.eventsFile).some((l) => l.event === 'Stop')).toBe(false);
  });
});
