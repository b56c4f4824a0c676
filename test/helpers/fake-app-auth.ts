/**
 * A small fake of GitHub's API for the client's tests: the App's endpoints (JWT verified with the
 * App's public key: RS256, iss = the App's id, exp - iat ≤ 600), installation tokens, the
 * repository → installation lookup, GET /user, and every other route answered from a script (or 201
 * with a new id). Each request is recorded with the time it arrived. Real HTTP on 127.0.0.1:0.
 */
import { createPublicKey, generateKeyPairSync, type KeyObject, verify } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface SeenRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
  /** Date.now() when it arrived. */
  at: number;
}

export interface ScriptedAnswer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export interface FakeAppAuth {
  url: string;
  requests: SeenRequest[];
  /** Installation tokens minted, in order. */
  minted: Array<{ installationId: number; token: string }>;
  /** `owner/repo` → installation (GET /repos/{o}/{r}/installation). */
  repoInstallations: Map<string, number>;
  /** Installations that exist (minting for another is a 404). */
  installations: Set<number>;
  /** Tokens GitHub accepts (minted ones are added; revoke by deleting). */
  validTokens: Set<string>;
  /** Answers for `METHOD /path`, used in order before the default. */
  script(route: string, ...answers: ScriptedAnswer[]): void;
  /** JWTs that failed verification (each a reason): should stay empty. */
  badJwts: string[];
  close(): Promise<void>;
}

/** The token the fake mints as the `n`th (from 1) of all it mints, for installation `installationId`. */
export function fakeInstallationToken(installationId: number, n: number): string {
  return `ghs_inst${installationId}n${n}abcdefghijklmnop`;
}

export function testAppKey(): { privateKey: string; publicKey: KeyObject } {
  // PKCS#1, the form GitHub gives an App's key in.
  const pair = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  });
  return { privateKey: pair.privateKey, publicKey: createPublicKey(pair.publicKey) };
}

/** Why `jwt` is not the App's, or undefined when it is. */
export function jwtProblem(jwt: string, publicKey: KeyObject, appId: number): string | undefined {
  const [h, p, s] = jwt.split('.');
  if (!h || !p || !s) return 'not three parts';
  const header = JSON.parse(Buffer.from(h, 'base64url').toString()) as { alg?: string };
  if (header.alg !== 'RS256') return `alg ${header.alg}`;
  const signed = verify('sha256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, 'base64url'));
  if (!signed) return 'bad signature';
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString()) as {
    iss?: unknown;
    iat?: number;
    exp?: number;
  };
  if (String(claims.iss) !== String(appId)) return `iss ${String(claims.iss)}`;
  if (typeof claims.iat !== 'number' || typeof claims.exp !== 'number') return 'no iat/exp';
  if (claims.exp - claims.iat > 600) return 'lives longer than 10 minutes';
  return undefined;
}

export async function startFakeAppAuth(options: {
  appId: number;
  publicKey?: KeyObject;
  slug?: string;
  userLogin?: string;
  /** The `expires_at` of a token minted now (default: an hour from Date.now()). */
  expiresAt?: () => string;
}): Promise<FakeAppAuth> {
  const requests: SeenRequest[] = [];
  const minted: FakeAppAuth['minted'] = [];
  const badJwts: string[] = [];
  const scripts = new Map<string, ScriptedAnswer[]>();
  const repoInstallations = new Map<string, number>();
  const installations = new Set<number>();
  const validTokens = new Set<string>();
  let nextId = 1000;

  const jwtOk = (authorization: string | undefined): boolean => {
    const m = /^bearer (.+)$/i.exec(authorization ?? '');
    if (!m?.[1] || !options.publicKey) return false;
    const problem = jwtProblem(m[1], options.publicKey, options.appId);
    if (problem) badJwts.push(problem);
    return problem === undefined;
  };
  const tokenOk = (authorization: string | undefined): boolean => {
    const m = /^token (.+)$/i.exec(authorization ?? '');
    return m?.[1] !== undefined && validTokens.has(m[1]);
  };

  const answer = (req: SeenRequest): ScriptedAnswer => {
    const scripted = scripts.get(`${req.method} ${req.path}`)?.shift();
    if (scripted) return scripted;
    const app = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(req.path);
    if (req.method === 'POST' && app) {
      if (!jwtOk(req.authorization))
        return { status: 401, body: { message: 'A JSON web token could not be decoded' } };
      const installationId = Number(app[1]);
      if (!installations.has(installationId)) return { status: 404, body: { message: 'Not Found' } };
      const token = fakeInstallationToken(installationId, minted.length + 1);
      minted.push({ installationId, token });
      validTokens.add(token);
      const expires = options.expiresAt?.() ?? new Date(Date.now() + 3_600_000).toISOString();
      return { status: 201, body: { token, expires_at: expires, permissions: {} } };
    }
    const repoInst = /^\/repos\/([^/]+)\/([^/]+)\/installation$/.exec(req.path);
    if (req.method === 'GET' && repoInst) {
      if (!jwtOk(req.authorization)) return { status: 401, body: { message: 'Bad credentials' } };
      const id = repoInstallations.get(`${repoInst[1]}/${repoInst[2]}`);
      return id === undefined
        ? { status: 404, body: { message: 'Not Found' } }
        : { status: 200, body: { id } };
    }
    if (req.method === 'GET' && req.path === '/app') {
      if (!jwtOk(req.authorization)) return { status: 401, body: { message: 'Bad credentials' } };
      return { status: 200, body: { id: options.appId, slug: options.slug ?? 'the-loop-test' } };
    }
    if (!tokenOk(req.authorization)) return { status: 401, body: { message: 'Bad credentials' } };
    if (req.method === 'GET' && req.path === '/user')
      return { status: 200, body: { login: options.userLogin ?? 'octo' } };
    if (req.method === 'GET' && /\/pulls\/\d+$/.test(req.path))
      return { status: 200, body: { head: { sha: 'a'.repeat(40) } } };
    return { status: req.method === 'PATCH' ? 200 : 201, body: { id: nextId++ } };
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString();
      const seen: SeenRequest = {
        method: req.method ?? 'GET',
        path: new URL(req.url ?? '/', 'http://fake').pathname,
        authorization: req.headers.authorization,
        body: text ? (JSON.parse(text) as unknown) : undefined,
        at: Date.now(),
      };
      requests.push(seen);
      const a = answer(seen);
      res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
      res.end(JSON.stringify(a.body ?? {}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    requests,
    minted,
    repoInstallations,
    installations,
    validTokens,
    badJwts,
    script: (route, ...answers) => scripts.set(route, [...(scripts.get(route) ?? []), ...answers]),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
