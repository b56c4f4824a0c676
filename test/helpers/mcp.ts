import { randomUUID } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { Tmux } from '../../src/runners/tmux/tmux.js';
import { BIN } from './cli.js';
import { stopTmuxServer } from './tmux.js';

/**
 * `the-loop mcp` as a real child process, driven by the SDK's own client over stdio — what Claude
 * Code, Codex or Gemini would run.
 */
export interface McpHandle {
  client: Client;
  /** What the server wrote to stderr so far. */
  stderr(): string;
  pid: number | undefined;
  close(): Promise<void>;
}

export async function startMcp(options: {
  cwd: string;
  args?: string[];
  env?: Record<string, string>;
}): Promise<McpHandle> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp', ...(options.args ?? [])],
    cwd: options.cwd,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      XDG_STATE_HOME: process.env.XDG_STATE_HOME ?? '',
      LANG: 'C.UTF-8',
      ...options.env,
    },
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
  });
  const client = new Client({ name: 'the-loop-test', version: '1.0.0' });
  try {
    await client.connect(transport);
  } catch (error) {
    await transport.close().catch(() => {});
    throw new Error(`the-loop mcp did not start: ${(error as Error).message}\nstderr: ${stderr}`);
  }
  return { client, stderr: () => stderr, pid: transport.pid ?? undefined, close: () => client.close() };
}

export interface Called {
  isError: boolean;
  /** The stable code of an error result (`E_SCOPE`…), null for a success. */
  code: string | null;
  text: string;
  structured: Record<string, unknown> | undefined;
}

export async function call(client: Client, name: string, args: Record<string, unknown>): Promise<Called> {
  const result = (await client.callTool({ name, arguments: args })) as {
    isError?: boolean;
    content: Array<{ type: string; text?: string }>;
    structuredContent?: Record<string, unknown>;
  };
  const text = result.content.map((c) => c.text ?? '').join('\n');
  const isError = result.isError === true;
  const code = isError ? (/^(E_[A-Z_]+):/.exec(text)?.[1] ?? null) : null;
  return { isError, code, text, structured: result.structuredContent };
}

/** A private tmux server for one test, with helpers to make sessions; `stop()` ends it. */
export function privateTmux() {
  const socket = `loop-mcp-${randomUUID().slice(0, 8)}`;
  const tmux = new Tmux({ socket });
  return {
    socket,
    tmux,
    /** A detached session running bash without rc files (bracketed paste on), or the given argv. */
    async session(
      name: string,
      argv: string[] = ['bash', '--norc', '--noprofile'],
      env: Record<string, string> = {},
    ) {
      const envArgs = Object.entries(env).flatMap(([k, v]) => ['-e', `${k}=${v}`]);
      await tmux.must(
        ['new-session', '-d', '-s', name, '-x', '120', '-y', '30', ...envArgs, '--', ...argv],
        'new-session',
      );
    },
    async paneOf(name: string): Promise<string> {
      return (await tmux.must(['display-message', '-p', '-t', `=${name}:`, '#{pane_id}'], 'display')).trim();
    },
    async capture(name: string): Promise<string> {
      return tmux.must(['capture-pane', '-p', '-J', '-S', '-', '-t', `=${name}:`], 'capture');
    },
    stop: () => stopTmuxServer(tmux),
  };
}
