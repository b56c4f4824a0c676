import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const BIN = join(ROOT, 'bin/the-loop.js');
export const FAKE_ENGINE = join(ROOT, 'test/fixtures/bin/fake-engine.mjs');
export const NODE_BIN_DIR = join(ROOT, 'node_modules/.bin');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Every pid the CLI process had (for argv checks): just the CLI itself here. */
  pid: number | undefined;
}

/** Run the built CLI as a real child process (argv array, no shell). */
export function runCli(
  args: string[],
  options: {
    cwd: string;
    env?: Record<string, string | undefined>;
    input?: string;
    timeoutMs?: number;
    /** Called with all of stderr so far each time more comes (to follow a command that waits). */
    onStderr?: (soFar: string) => void;
  },
): Promise<CliResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], {
      cwd: options.cwd,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        XDG_STATE_HOME: process.env.XDG_STATE_HOME,
        LANG: 'C.UTF-8',
        ...options.env,
      },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
      options.onStderr?.(stderr);
    });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the-loop ${args.join(' ')} timed out\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr, pid: child.pid });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** A throwaway project directory with a config file; `cleanup()` removes it. */
export function makeProject(config: Record<string, unknown> = {}): {
  dir: string;
  configPath: string;
  cleanup: () => void;
} {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-test-'));
  const configPath = join(dir, '.the-loop/config.yaml');
  mkdirSync(dirname(configPath), { recursive: true });
  writeFileSync(configPath, stringify(config));
  return { dir, configPath, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * Config declaring the fake engine (Claude stream-json shapes) as `fake`. It runs unsandboxed: tests
 * of the runners and the dispatcher watch its pids and files from outside (the sandbox has its own
 * tests, and the real engines run in it). The gateway takes any free port.
 */
export function fakeEngineConfig(
  stateDir: string,
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  return {
    sandbox: { mode: 'none' },
    gateway: { port: 0 },
    // Daemons of tests run side by side: the console takes any free port too.
    console: { port: 0 },
    // Tests run with the real HOME: a test daemon must not import this machine's own Claude Code
    // transcripts (~/.claude/projects) into its registry. The watch tests turn it back on.
    usage: { watchClaude: false },
    defaults: { engine: 'fake', backstopSeconds: 60, killGraceSeconds: 0.5 },
    engines: {
      fake: {
        binary: FAKE_ENGINE,
        protocol: 'claude-stream-json',
        sessionId: 'assign',
        headless: {
          args: ['-p', '--output-format', 'stream-json'],
          start: ['--session-id', '{sessionId}'],
          resume: ['--resume', '{sessionId}'],
          promptPrefix: ['--'],
        },
        credentials: [{ env: 'ANTHROPIC_API_KEY', kind: 'api-key' }],
        passEnv: ['FAKE_ENGINE_ARGV_LOG', 'FAKE_ENGINE_CHILD_PID_FILE'],
        env: { FAKE_ENGINE_STATE: stateDir },
        ...extra,
      },
    },
  };
}

export const pidAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** A TCP port free on the loopback right now (for a config that needs a fixed one). */
export function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}
