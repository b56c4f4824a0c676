import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { signBody } from '../../src/github/verify.js';
import { BIN, ROOT } from './cli.js';

export interface DaemonProcess {
  child: ChildProcess;
  webhookUrl: string;
  output: () => string;
  /** SIGTERM and wait for exit. */
  stop: () => Promise<number | null>;
}

/** `the-loop serve --port 0` as a real child process; resolves once it prints its webhook URL. */
export function startDaemonProcess(options: {
  cwd: string;
  env: Record<string, string | undefined>;
  timeoutMs?: number;
}): Promise<DaemonProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0'], {
    cwd: options.cwd,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      XDG_STATE_HOME: process.env.XDG_STATE_HOME,
      LANG: 'C.UTF-8',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (c: string) => {
    out += c;
  });
  child.stderr?.setEncoding('utf8').on('data', (c: string) => {
    out += c;
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`daemon did not start:\n${out}`));
    }, options.timeoutMs ?? 30_000);
    const check = () => {
      const match = /webhook\s+(http:\/\/\S+)/.exec(out);
      if (match?.[1] && /Ready\./.test(out)) {
        clearTimeout(timer);
        child.stdout?.off('data', check);
        resolve({
          child,
          webhookUrl: match[1],
          output: () => out,
          stop: async () => {
            if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
            return exited;
          },
        });
      }
    };
    child.stdout?.on('data', check);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`daemon exited (${code}) before it was ready:\n${out}`));
    });
  });
}

export const fixture = (name: string): Record<string, unknown> =>
  JSON.parse(readFileSync(join(ROOT, 'test/fixtures/github', `${name}.json`), 'utf8')) as Record<
    string,
    unknown
  >;

/** POST a signed delivery the way GitHub does (compact JSON, HMAC over the exact bytes). */
export async function sendDelivery(
  url: string,
  secret: string,
  event: string,
  payload: unknown,
  options: { id?: string; badSignature?: boolean } = {},
): Promise<{ status: number; text: string; id: string }> {
  const id = options.id ?? randomUUID();
  const body = Buffer.from(JSON.stringify(payload));
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': event,
      'x-github-delivery': id,
      'x-hub-signature-256': options.badSignature
        ? signBody(`${secret}-wrong`, body)
        : signBody(secret, body),
      'user-agent': 'GitHub-Hookshot/test',
    },
    body,
  });
  return { status: res.status, text: (await res.text()).trim(), id };
}

/** Follow deliveries through the CLI (`events show --json`): one's record, a wait, its end. */
export function followDeliveries(cli: (args: string[]) => Promise<{ stdout: string }>) {
  const delivery = async (id: string) =>
    (
      JSON.parse((await cli(['events', 'show', id, '--json'])).stdout) as {
        delivery: { status: string; reason: string | null };
      }
    ).delivery;
  async function until<T>(what: string, probe: () => Promise<T | undefined>, tries = 600): Promise<T> {
    for (let i = 0; i < tries; i++) {
      const v = await probe();
      if (v !== undefined) return v;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`timed out waiting for ${what}`);
  }
  const settled = (id: string) =>
    until(`delivery ${id}`, async () => {
      const d = await delivery(id);
      return d.status === 'done' || d.status === 'failed' ? d.status : undefined;
    });
  return { delivery, until, settled };
}
