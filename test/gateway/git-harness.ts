/**
 * A tiny gateway for the git proxy's tests and benchmark: a node:http server that authorizes one
 * fixed capability token from `Authorization: Bearer <token>` (as the daemon's gateway does) and
 * mounts a git handler at `/git/`, with fake ports that collect the acts it records. git is given
 * the token the way the daemon gives it to engines: `http.<gateway>/git/.extraHeader` through
 * GIT_CONFIG_COUNT/KEY/VALUE in the environment; the URL carries no token.
 */
import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Policy } from '../../src/acts/decide.js';
import { handleGit } from '../../src/gateway/git/git-proxy.js';
import type { GatewayHandler, GatewayPorts, GatewaySession, WireAct } from '../../src/gateway/types.js';
import { createLogger, memorySink } from '../../src/log/logger.js';

export const TEST_TOKEN = 'tlg1_testCapabilityToken0123456789abcdefghijklm';

export interface Harness {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** The gateway URL of a repository: `<url>/git/<owner>/<repo>.git`. */
  remote(owner: string, repo: string): string;
  session: GatewaySession;
  acts: WireAct[];
  /** What the handler threw (it should never throw: the gateway would answer a bare 502). */
  errors: unknown[];
  /** Every log line the handler wrote (JSON). */
  logs: string[];
  /** Environment for git: the capability token as an extra header for the gateway's git prefix. */
  gitEnv: NodeJS.ProcessEnv;
  /** Wait until every request the handler took has finished (its acts are then recorded). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  gitUrl: string;
  /** The real credential the gateway holds (undefined: none). */
  upstreamToken: string | undefined;
  /** The credential per session, as the daemon's ports ask the GitHub client (overrides upstreamToken). */
  tokenFor?: (session: GatewaySession) => Promise<string | undefined>;
  /** Told when the upstream refuses the credential (as the daemon's ports tell the client). */
  tokenRefused?: (session: GatewaySession) => void;
  policy: Policy;
  owner?: string;
  repo?: string;
  handler?: GatewayHandler;
  /** HOME for git (isolated from the real user's config). */
  home: string;
}

export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const session: GatewaySession = {
    id: 'session-1',
    workItem: `github:${options.owner ?? 'acme'}/${options.repo ?? 'demo'}#1`,
    owner: options.owner ?? 'acme',
    repo: options.repo ?? 'demo',
    engine: 'claude',
    cwd: options.home,
  };
  const acts: WireAct[] = [];
  const errors: unknown[] = [];
  const sink = memorySink();
  const ports: GatewayPorts = {
    logger: createLogger({ level: 'debug', sinks: [sink] }),
    policyFor: () => options.policy,
    recordAct: async (s, act) => {
      if (s.id !== session.id) throw new Error('act recorded for another session');
      acts.push(act);
    },
    recordUsage: async () => {},
    modelRoute: () => undefined,
    overBudget: async () => undefined,
    github: {
      gitUrl: options.gitUrl,
      apiUrl: 'http://127.0.0.1:9',
      tokenFor: options.tokenFor ?? (async () => options.upstreamToken),
      ...(options.tokenRefused ? { tokenRefused: options.tokenRefused } : {}),
    },
  };
  const handler = options.handler ?? handleGit;
  const pending = new Set<Promise<void>>();
  const server = createServer((req, res) => {
    const url = req.url ?? '/';
    if (req.headers.authorization !== `Bearer ${TEST_TOKEN}` || !url.startsWith('/git/')) {
      req.resume();
      res.writeHead(403, { 'content-type': 'text/plain' });
      res.end('no capability token\n');
      return;
    }
    const run = handler(req, res, { session, path: url.slice('/git/'.length), ports, token: TEST_TOKEN })
      .catch((error: unknown) => {
        errors.push(error);
        if (!res.headersSent) res.writeHead(502);
        res.end();
      })
      .finally(() => pending.delete(run));
    pending.add(run);
  });
  server.requestTimeout = 0;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    remote: (owner, repo) => `${url}/git/${owner}/${repo}.git`,
    session,
    acts,
    errors,
    logs: sink.lines,
    gitEnv: {
      HOME: options.home,
      PATH: process.env.PATH,
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_TERMINAL_PROMPT: '0',
      GIT_AUTHOR_NAME: 'Agent',
      GIT_AUTHOR_EMAIL: 'agent@example.test',
      GIT_COMMITTER_NAME: 'Agent',
      GIT_COMMITTER_EMAIL: 'agent@example.test',
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: `http.${url}/git/.extraHeader`,
      GIT_CONFIG_VALUE_0: `Authorization: Bearer ${TEST_TOKEN}`,
    },
    settled: async () => {
      while (pending.size > 0) await Promise.all([...pending]);
    },
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

export interface GitRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * Run git asynchronously (argv, no shell): the gateway runs in this process, so a synchronous
 * child would block the very server it talks to.
 */
export function runGit(cwd: string, env: NodeJS.ProcessEnv, ...args: string[]): Promise<GitRun> {
  return new Promise((resolve) => {
    execFile(
      'git',
      args,
      { cwd, env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
