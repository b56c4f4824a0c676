import { createHmac, timingSafeEqual } from 'node:crypto';

const SIGNATURE = /^sha256=([0-9a-f]{64})$/;

/**
 * GitHub's `X-Hub-Signature-256`: `sha256=` + hex HMAC-SHA256 of the raw request body with the
 * webhook secret. Compared in constant time; anything malformed is simply not valid.
 */
export function verifySignature(secret: string, body: Buffer, header: string | undefined): boolean {
  const match = header ? SIGNATURE.exec(header.trim().toLowerCase()) : null;
  if (!match?.[1]) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  const given = Buffer.from(match[1], 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

export function signBody(secret: string, body: Buffer | string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}
