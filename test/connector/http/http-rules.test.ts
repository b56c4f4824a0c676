import { describe, expect, it } from 'vitest';
import type { Grant } from '../../../src/connector/grant.js';
import {
  accessFor,
  admitRequest,
  bearerMatches,
  canonicalJson,
  isLoopbackHost,
  MAX_BODY_BYTES,
  type RequestHead,
  tokenFileStem,
} from '../../../src/connector/http/http-rules.js';

const TOKEN = 'tok-0123456789abcdef';
const access = accessFor({ host: '127.0.0.1', port: 4000 }, TOKEN);
const head = (over: Partial<RequestHead> = {}): RequestHead => ({
  method: 'POST',
  url: '/mcp',
  host: '127.0.0.1:4000',
  origin: undefined,
  authorization: `Bearer ${TOKEN}`,
  contentType: 'application/json',
  contentLength: 10,
  ...over,
});
const status = (over: Partial<RequestHead>) => {
  const v = admitRequest(head(over), access);
  return v.ok ? 200 : v.status;
};

describe('http-rules', () => {
  it('loopback addresses only', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'LOCALHOST'])
      expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'example.com', '127.0.0.1.example.com', '1270.0.0.1'])
      expect(isLoopbackHost(h), h).toBe(false);
  });

  it('Host first, then Origin, then the token, path, method, type, length', () => {
    expect(status({})).toBe(200);
    expect(status({ host: 'evil.example:4000', authorization: undefined })).toBe(403);
    expect(status({ host: undefined })).toBe(403);
    expect(status({ host: '127.0.0.1:4001' })).toBe(403);
    for (const host of ['localhost:4000', 'LocalHost:4000', '[::1]:4000'])
      expect(status({ host }), host).toBe(200);
    expect(status({ origin: 'http://evil.example', authorization: undefined })).toBe(403);
    expect(status({ origin: 'http://localhost:4000' })).toBe(200);
    expect(status({ origin: 'null' })).toBe(403);
    expect(status({ authorization: undefined, url: '/other' })).toBe(401);
    expect(status({ url: '/other' })).toBe(404);
    expect(status({ url: '/mcp?x=1' })).toBe(200);
    expect(status({ method: 'PUT' })).toBe(405);
    expect(status({ method: 'GET', contentType: undefined })).toBe(200);
    expect(status({ contentType: 'text/plain' })).toBe(415);
    expect(status({ contentType: 'application/json; charset=utf-8' })).toBe(200);
    expect(status({ contentType: 'application/jsonx' })).toBe(415);
    expect(status({ contentLength: MAX_BODY_BYTES + 1 })).toBe(413);
  });

  it('the bearer token, exactly', () => {
    expect(bearerMatches(`Bearer ${TOKEN}`, access.tokenDigest)).toBe(true);
    expect(bearerMatches(`bearer ${TOKEN}`, access.tokenDigest)).toBe(true);
    for (const h of [
      undefined,
      '',
      TOKEN,
      `Basic ${TOKEN}`,
      `Bearer ${TOKEN}x`,
      `Bearer ${TOKEN.slice(1)}`,
      'Bearer ',
    ])
      expect(bearerMatches(h, access.tokenDigest), String(h)).toBe(false);
  });

  it("a grant's file stem does not depend on key order, and differs with the grant", () => {
    const grant: Grant = {
      operator: 'ops',
      backends: ['tmux'],
      scope: 'read',
      targets: { kind: 'any' },
      tools: ['list_terminals', 'read_terminal'],
      run: { timeoutSeconds: 60, maxOutputLines: 2000, inPane: false },
    };
    const reversed = (o: object) => Object.fromEntries(Object.entries(o).reverse());
    const reordered = { ...reversed(grant), run: reversed(grant.run) } as Grant;
    expect(JSON.stringify(reordered)).not.toBe(JSON.stringify(grant));
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: 3 }] })).toBe('{"a":[{"c":3,"d":2}],"b":1}');
    expect(tokenFileStem(grant)).toMatch(/^ops-[0-9a-f]{8}$/);
    expect(tokenFileStem(reordered)).toBe(tokenFileStem(grant));
    expect(tokenFileStem({ ...grant, scope: 'write' })).not.toBe(tokenFileStem(grant));
  });
});
