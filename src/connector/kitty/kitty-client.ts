import { execFile } from 'node:child_process';

/**
 * A thin kitty remote-control client: every call is `kitty @ --to <address> <command> <args…>`
 * through execFile with an argv array — never a shell — and any text the command carries travels on
 * stdin, never on the command line. The child gets a minimal environment: `kitty @` needs nothing but
 * PATH to start, and the daemon's own environment (tokens, keys) has no business reaching it.
 */

export interface KittyClientOptions {
  /** The remote-control address (`unix:/path`, `tcp:host:port`). */
  to: string;
  /** The kitty binary (default `kitty` on PATH). */
  binary?: string | undefined;
  /** The longest one call may take (default 10 s): a wedged kitty must not hold a tool call. */
  timeoutMs?: number | undefined;
}

export interface KittyResult {
  ok: boolean;
  /** The exit code; null when the process was killed (timeout) or could not start. */
  code: number | null;
  stdout: string;
  stderr: string;
  /** The binary could not be started at all (ENOENT, EACCES). */
  spawnFailed: boolean;
}

/** Only what `kitty @` needs to start and print UTF-8: no secret of the daemon's reaches it. */
const ENV_KEYS = ['PATH', 'HOME', 'LANG', 'LC_ALL', 'TMPDIR'] as const;

function kittyEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const key of ENV_KEYS) {
    const value = process.env[key];
    if (value !== undefined) env[key] = value;
  }
  return env;
}

export class KittyClient {
  constructor(private readonly options: KittyClientOptions) {}

  get to(): string {
    return this.options.to;
  }

  get binary(): string {
    return this.options.binary ?? 'kitty';
  }

  /** `kitty @ --to <address> <args…>`, with `stdin` written to the child (and then closed). */
  remote(args: readonly string[], input?: { stdin?: string; timeoutMs?: number }): Promise<KittyResult> {
    return this.exec(['@', '--to', this.options.to, ...args], input);
  }

  /** `kitty <args…>` (for `--version`). */
  exec(args: readonly string[], input?: { stdin?: string; timeoutMs?: number }): Promise<KittyResult> {
    return new Promise((resolve) => {
      const child = execFile(
        this.binary,
        [...args],
        {
          timeout: input?.timeoutMs ?? this.options.timeoutMs ?? 10_000,
          maxBuffer: 64 * 1024 * 1024,
          env: kittyEnv(),
          encoding: 'utf8',
        },
        (error, stdout, stderr) => {
          const errno = error ? (error as NodeJS.ErrnoException).code : undefined;
          const spawnFailed = errno === 'ENOENT' || errno === 'EACCES';
          const code = error ? (typeof error.code === 'number' ? error.code : null) : 0;
          resolve({ ok: !error, code, stdout: String(stdout), stderr: String(stderr), spawnFailed });
        },
      );
      // A child that died before reading its stdin must not crash the daemon with EPIPE.
      child.stdin?.on('error', () => {});
      child.stdin?.end(input?.stdin ?? '');
    });
  }
}

/** kitty's error text, one line, bounded: it names the address and the match, nothing else. */
export function kittyError(result: KittyResult): string {
  const text = (result.stderr.trim() || result.stdout.trim() || `exit ${result.code ?? 'killed'}`)
    .split('\n')
    .slice(-1)[0];
  return (text ?? '').slice(0, 300);
}
