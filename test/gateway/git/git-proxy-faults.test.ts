/**
 * The git proxy when things go wrong: bodies that are not a push (malformed, truncated,
 * compressed), an upstream that refuses the connection, resets, cuts its answer or hangs (a raw
 * net server), a client that leaves mid-push, and an upstream that refuses the gateway's
 * credential. Each ends with a clear answer to the client, nothing unchecked forwarded, and the
 * acts recorded once with what is certain.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { request } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolvePolicy } from '../../../src/acts/policy.js';
import { createGitHandler } from '../../../src/gateway/git/git-proxy.js';
import { encodePkt, FLUSH_PKT } from '../../../src/gateway/git/pkt-line.js';
import { type GitUpstream, startGitUpstream } from '../../fixtures/git-upstream.js';
import { git } from '../../helpers/git.js';
import { type Harness, runGit, startHarness, TEST_TOKEN } from '../git-harness.js';

const strict = resolvePolicy(undefined, undefined, 'main');
const Z = '0'.repeat(40);
const A = 'a'.repeat(40);
const CAPS = 'report-status side-band-64k agent=test';
const pushHead = (ref = 'refs/heads/feature') =>
  Buffer.concat([encodePkt(`${Z} ${A} ${ref}\0${CAPS}\n`), FLUSH_PKT]);

let root: string;
let upstream: GitUpstream;
let harness: Harness | undefined;
const servers: Server[] = [];

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-git-faults-'));
  upstream = await startGitUpstream();
  upstream.createRepo('acme', 'demo');
});

afterEach(async () => {
  if (harness) {
    await harness.settled();
    expect(harness.errors).toEqual([]);
    expect(harness.logs.join('\n')).not.toContain(TEST_TOKEN);
    expect(harness.logs.join('\n')).not.toContain(upstream.token);
    await harness.close();
  }
  harness = undefined;
  for (const s of servers.splice(0)) await new Promise((resolve) => s.close(resolve));
  await upstream.close();
  rmSync(root, { recursive: true, force: true });
});

/** The gateway in front of `gitUrl`, holding `token` (null: no credential at all). */
async function gateway(
  gitUrl = upstream.url,
  token: string | null = upstream.token,
  idleTimeoutMs = 120_000,
) {
  harness = await startHarness({
    gitUrl,
    upstreamToken: token ?? undefined,
    policy: strict,
    home: root,
    handler: createGitHandler({ idleTimeoutMs }),
  });
  return harness;
}

/** POST a body to the gateway's receive-pack endpoint; the status and text of the answer. */
function post(h: Harness, body: Buffer, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = request(`${h.remote('acme', 'demo')}/git-receive-pack`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_TOKEN}`,
        'content-type': 'application/x-git-receive-pack-request',
        'content-length': String(body.length),
        ...headers,
      },
    });
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('latin1') }),
      );
    });
    req.on('error', reject);
    req.end(body);
  });
}

const posts = () => upstream.requests.filter((r) => r.method === 'POST');

describe('bodies that are not a push', () => {
  it('refuses malformed pkt-lines, a truncated head and a compressed body, forwarding nothing', async () => {
    const h = await gateway();
    const bad = await post(h, Buffer.from('zzzz not a pkt-line'));
    expect(bad).toEqual({
      status: 400,
      text: '[the-loop gateway] malformed pkt-line: bad pkt-line length "zzzz"\n',
    });
    const truncated = await post(h, pushHead().subarray(0, 50));
    expect(truncated.status).toBe(400);
    expect(truncated.text).toContain('truncated request');
    const noCaps = await post(h, Buffer.concat([encodePkt(`${Z} ${A} refs/heads/x\n`), FLUSH_PKT]));
    expect(noCaps.text).toContain('the first command carries no capability list');
    const gz = await post(h, pushHead(), { 'content-encoding': 'gzip' });
    expect(gz.status).toBe(415);
    expect(posts()).toEqual([]);
    await h.settled();
    expect(h.acts.map((a) => [a.kind, a.outcome, a.rule])).toEqual([
      ['unreadable-input', 'blocked', 'gateway: malformed'],
      ['unreadable-input', 'blocked', 'gateway: malformed'],
      ['unreadable-input', 'blocked', 'gateway: malformed'],
      ['unreadable-input', 'blocked', 'gateway: encoding'],
    ]);
  });

  it('forwards the flush-only probe untouched, recording no act', async () => {
    const h = await gateway();
    expect(await post(h, FLUSH_PKT)).toEqual({ status: 200, text: '' });
    expect(posts().map((p) => p.bodyBytes)).toEqual([4]);
    await h.settled();
    expect(h.acts).toEqual([]);
  });
});

type Fault = 'reset' | 'cut' | 'hang';

/**
 * A raw upstream: answers the receive-pack ref advertisement of an empty repository itself, and
 * meets a push with `fault` once its body has arrived: a TCP reset before answering, an answer cut
 * after its first bytes, or silence. `pushSeen` resolves when a push's head has arrived;
 * `pushClosed` when the connection that carried it closed.
 */
async function rawUpstream(fault: Fault) {
  let seen: () => void = () => {};
  let closed: () => void = () => {};
  const pushSeen = new Promise<void>((resolve) => (seen = resolve));
  const pushClosed = new Promise<void>((resolve) => (closed = resolve));
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    let pushing = false;
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      const text = buf.toString('latin1');
      if (!pushing && text.startsWith('GET ') && text.includes('\r\n\r\n')) {
        buf = Buffer.alloc(0);
        const advert = Buffer.concat([
          encodePkt('# service=git-receive-pack\n'),
          FLUSH_PKT,
          encodePkt(
            `${Z} capabilities^{}\0report-status delete-refs side-band-64k quiet ofs-delta agent=raw\n`,
          ),
          FLUSH_PKT,
        ]);
        socket.write(
          `HTTP/1.1 200 OK\r\nContent-Type: application/x-git-receive-pack-advertisement\r\nContent-Length: ${advert.length}\r\n\r\n`,
        );
        socket.write(advert);
        return;
      }
      if (!text.startsWith('POST ') || !text.includes('\r\n\r\n')) return;
      if (!pushing) {
        pushing = true;
        socket.on('close', () => closed());
        seen();
      }
      const length = /content-length: (\d+)/i.exec(text);
      const bodyStart = text.indexOf('\r\n\r\n') + 4;
      const whole = length ? buf.length - bodyStart >= Number(length[1]) : text.endsWith('\r\n0\r\n\r\n');
      if (!whole || fault === 'hang') return;
      if (fault === 'reset') socket.resetAndDestroy();
      else {
        const progress = encodePkt(Buffer.from('\x02Resolving deltas: 50%\r', 'latin1')).toString('latin1');
        socket.write(
          'HTTP/1.1 200 OK\r\nContent-Type: application/x-git-receive-pack-result\r\nTransfer-Encoding: chunked\r\n\r\n' +
            `${progress.length.toString(16)}\r\n${progress}\r\n`,
          () => socket.resetAndDestroy(),
        );
      }
    });
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  servers.push(server);
  const stop = server.close.bind(server);
  server.close = (cb) => {
    for (const s of sockets) s.destroy();
    return stop(cb);
  };
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, pushSeen, pushClosed };
}

/** A work repository with one commit, its origin the gateway. */
function work(h: Harness): string {
  const dir = join(root, 'work');
  git(root, 'init', '-q', '-b', 'main', dir);
  writeFileSync(join(dir, 'f.txt'), 'x\n');
  git(dir, 'add', 'f.txt');
  git(dir, '-c', 'user.name=A', '-c', 'user.email=a@example.test', 'commit', '-q', '-m', 'x');
  git(dir, 'remote', 'add', 'origin', h.remote('acme', 'demo'));
  return dir;
}

describe('an upstream that fails', () => {
  it('reset before answering: 502 to git, the act unknown', async () => {
    const raw = await rawUpstream('reset');
    const h = await gateway(raw.url);
    const r = await runGit(work(h), h.gitEnv, 'push', 'origin', 'HEAD:feature');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('502');
    await h.settled();
    expect(h.acts).toMatchObject([
      { detail: { ref: 'refs/heads/feature' }, outcome: 'unknown', verdict: 'allow' },
    ]);
    expect(h.acts[0]?.detail.upstream).toMatch(/^\[the-loop gateway\] git upstream failed \(ECONNRESET\)/);
  });

  it('answer cut mid-stream: git sees a broken answer, the act unknown', async () => {
    const raw = await rawUpstream('cut');
    const h = await gateway(raw.url);
    const r = await runGit(work(h), h.gitEnv, 'push', 'origin', 'HEAD:feature');
    expect(r.code).not.toBe(0);
    await h.settled();
    expect(h.acts).toMatchObject([
      { outcome: 'unknown', detail: { upstream: 'the upstream answer was cut before its report' } },
    ]);
  });

  it('silent: 504 once the idle timeout passes, the act unknown', async () => {
    const raw = await rawUpstream('hang');
    const h = await gateway(raw.url, upstream.token, 500);
    const r = await runGit(work(h), h.gitEnv, 'push', 'origin', 'HEAD:feature');
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('504');
    await h.settled();
    expect(h.acts).toMatchObject([{ outcome: 'unknown' }]);
    expect(h.acts[0]?.detail.upstream).toMatch(/timed out/);
  });

  it('unreachable: 502 that says so, and a push certainly not applied (failed)', async () => {
    const closed = await rawUpstream('hang');
    const port = new URL(closed.url).port;
    const s = servers.pop();
    await new Promise((resolve) => s?.close(resolve));
    const h = await gateway(`http://127.0.0.1:${port}`);
    const ls = await runGit(root, h.gitEnv, 'ls-remote', h.remote('acme', 'demo'));
    expect(ls.stderr).toContain('remote: [the-loop gateway] git upstream unreachable (ECONNREFUSED)');
    const pushed = await post(h, Buffer.concat([pushHead(), Buffer.from('PACK')]));
    expect(pushed.status).toBe(502);
    await h.settled();
    expect(h.acts).toMatchObject([{ outcome: 'failed' }]);
  });

  it("refusing the gateway's credential: a clear 502, never a password prompt", async () => {
    const h = await gateway(upstream.url, 'ghs_wrongToken000000000000000');
    const ls = await runGit(root, h.gitEnv, 'ls-remote', h.remote('acme', 'demo'));
    expect(ls.code).not.toBe(0);
    expect(ls.stderr).toContain(
      "remote: [the-loop gateway] the git upstream refused the gateway's GitHub credential (HTTP 401)",
    );
    expect(ls.stderr).not.toMatch(/Username|Password/);
    await harness?.close();
    const none = await gateway(upstream.url, null);
    const ls2 = await runGit(root, none.gitEnv, 'ls-remote', none.remote('acme', 'demo'));
    expect(ls2.stderr).toContain('needs a credential the gateway does not hold');
  });
});

describe('a client that leaves mid-push', () => {
  it('aborts the upstream request; the push is recorded failed (its pack never completed)', async () => {
    const raw = await rawUpstream('hang');
    const h = await gateway(raw.url);
    const req = request(`${h.remote('acme', 'demo')}/git-receive-pack`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${TEST_TOKEN}`,
        'content-type': 'application/x-git-receive-pack-request',
      },
    });
    req.on('error', () => {});
    req.write(
      Buffer.concat([pushHead(), Buffer.from('PACK\0\0\0\x02\0\0\0\x09', 'latin1'), Buffer.alloc(100_000)]),
    );
    await raw.pushSeen;
    req.destroy();
    await raw.pushClosed;
    await h.settled();
    expect(h.acts).toMatchObject([
      {
        detail: {
          ref: 'refs/heads/feature',
          upstream: 'the client went away before the whole pack was sent',
        },
        outcome: 'failed',
      },
    ]);
  });

  it('the real git client killed mid-pack: the upstream request is aborted, nothing lands, the act failed', async () => {
    const h = await gateway();
    const dir = work(h);
    const fd = openSync(join(dir, 'big.bin'), 'w');
    for (let i = 0; i < 40; i++) writeSync(fd, randomBytes(1024 * 1024));
    closeSync(fd);
    git(dir, '-c', 'core.compression=0', 'add', 'big.bin');
    git(dir, '-c', 'user.name=A', '-c', 'user.email=a@example.test', 'commit', '-q', '-m', 'big');
    // Its own process group: git, git-remote-http and pack-objects all go at once, as on a crash.
    const child = spawn('git', ['-c', 'pack.compression=0', 'push', '-q', 'origin', 'HEAD:big'], {
      cwd: dir,
      env: h.gitEnv,
      detached: true,
      stdio: 'ignore',
    });
    let gone = false;
    const exited = new Promise((resolve) => child.once('exit', resolve)).then(() => {
      gone = true;
    });
    let sent = posts().find((p) => p.bodyBytes > 1024 * 1024);
    while (!sent) {
      if (gone) throw new Error('git exited before 1 MB of its pack reached the upstream');
      await new Promise((resolve) => setTimeout(resolve, 10));
      sent = posts().find((p) => p.bodyBytes > 1024 * 1024);
    }
    process.kill(-(child.pid ?? 0), 'SIGKILL');
    await exited;
    await sent.closed;
    expect(sent.complete).toBe(false);
    await h.settled();
    expect(h.acts).toMatchObject([
      {
        detail: { ref: 'refs/heads/big', upstream: 'the client went away before the whole pack was sent' },
        outcome: 'failed',
      },
    ]);
    expect(upstream.refs('acme', 'demo')).toEqual({});
  });
});
