/**
 * What the GitHub API proxy tests stand on: a mock GitHub API that accepts only the real token, a
 * stand-in for the gateway's listeners (TCP under `/gh/`, and a Unix socket where everything is the
 * API, as gh's `http_unix_socket` sends it) that authorizes one capability token and mounts the
 * handler with fake ports collecting acts and log lines, and the real `gh` run against it.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import type { Policy } from '../../src/acts/decide.js';
import { resolvePolicy } from '../../src/acts/policy.js';
import type { GatewayHandler, GatewayPorts, GatewaySession, WireAct } from '../../src/gateway/types.js';
import { createLogger, memorySink } from '../../src/log/logger.js';
import {
  type MockGitHubApi,
  type MockGitHubOptions,
  startMockGitHubApi,
} from '../fixtures/mock-github-api.js';
import { git } from '../helpers/git.js';

export const TEST_TOKEN = `tlg1_${'T'.repeat(43)}`;
export const REAL_TOKEN = 'ghs_realInstallationToken0123456789';
export const SESSION: GatewaySession = {
  id: 's1',
  workItem: 'github:acme/demo#1',
  owner: 'acme',
  repo: 'demo',
  engine: 'claude',
  cwd: '/',
};

export interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

export interface GitHubHarness {
  mock: MockGitHubApi;
  /** The TCP listener (`/gh/…` is the API). */
  url: string;
  acts: WireAct[];
  logs: string[];
  /** What `policyFor` answers; tests change it. Default: the default policy, `main` protected. */
  policy: Policy;
  /** The real gh, argv only, isolated: its own config (the gateway's socket), home and cache. */
  gh(...args: string[]): Promise<Ran>;
  close(): Promise<void>;
}

/** A git checkout whose origin is acme/demo on github.com, gh's home, and gh's config naming the socket. */
export function prepareGhDir(dir: string): void {
  for (const sub of ['repo', 'home', 'gh']) mkdirSync(join(dir, sub));
  git(join(dir, 'repo'), 'init', '-q', '-b', 'main');
  git(join(dir, 'repo'), 'remote', 'add', 'origin', 'https://github.com/acme/demo.git');
  writeFileSync(join(dir, 'gh', 'config.yml'), `http_unix_socket: ${join(dir, 'gw.sock')}\n`);
}

/** gh with `dir`'s home and checkout; its config and token: the gateway's, unless others are given. */
export function runGh(
  dir: string,
  args: string[],
  through: { configDir: string; token: string } = { configDir: join(dir, 'gh'), token: TEST_TOKEN },
): Promise<Ran> {
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: join(dir, 'home'),
    GH_CONFIG_DIR: through.configDir,
    GH_TOKEN: through.token,
    GH_PROMPT_DISABLED: '1',
    GH_NO_UPDATE_NOTIFIER: '1',
    NO_COLOR: '1',
  };
  return new Promise((resolve) => {
    execFile('gh', args, { cwd: join(dir, 'repo'), env, timeout: 60_000 }, (error, stdout, stderr) => {
      const code = error ? Number((error as NodeJS.ErrnoException).code ?? 1) : 0;
      resolve({ code: Number.isNaN(code) ? 1 : code, stdout, stderr });
    });
  });
}

export async function startHarness(
  dir: string,
  handler: GatewayHandler,
  mockOptions: Omit<MockGitHubOptions, 'token'>,
): Promise<GitHubHarness> {
  const mock = await startMockGitHubApi({ ...mockOptions, token: REAL_TOKEN });
  const sink = memorySink();
  const h: GitHubHarness = {
    mock,
    url: '',
    acts: [],
    logs: sink.lines,
    policy: resolvePolicy(undefined, undefined, 'main'),
    gh: (...args) => runGh(dir, args),
    close: async () => {},
  };
  const ports: GatewayPorts = {
    logger: createLogger({ level: 'debug', sinks: [sink] }),
    policyFor: () => h.policy,
    recordAct: async (_s, act) => {
      h.acts.push(act);
    },
    recordUsage: async () => {},
    modelRoute: () => undefined,
    overBudget: async () => undefined,
    github: { apiUrl: mock.url, gitUrl: 'http://127.0.0.1:1', tokenFor: async () => REAL_TOKEN },
  };
  const sockets = new Set<Socket>();
  const serve = (unix: boolean) =>
    createServer((req, res) => {
      const auth = /^(?:token|bearer)\s+(\S+)$/i.exec(req.headers.authorization ?? '');
      const url = req.url ?? '/';
      if (auth?.[1] !== TEST_TOKEN || (!unix && !url.startsWith('/gh/'))) {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end('{"message":"no capability token"}');
        return;
      }
      const path = unix ? url : url.slice('/gh'.length);
      handler(req, res, { session: SESSION, path, ports, token: TEST_TOKEN }).catch(() => res.destroy());
    }).on('connection', (s: Socket) => {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    });
  const tcp = serve(false);
  const unix = serve(true);
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => unix.listen(join(dir, 'gw.sock'), resolve));
  const closeServer = (s: Server) => new Promise<void>((resolve) => s.close(() => resolve()));
  h.url = `http://127.0.0.1:${(tcp.address() as AddressInfo).port}`;
  h.close = async () => {
    for (const s of sockets) s.destroy();
    await Promise.all([closeServer(tcp), closeServer(unix)]);
    await mock.close();
  };
  return h;
}
