import { createHmac, randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Payer, PayerKind } from '../core/ports/ledger.js';
import type { ResolvedCredential } from '../engines/env.js';

/**
 * Who pays for an engine's requests, from the credential the engine was given — by kind, never by
 * value. Two API keys are told apart by a fingerprint: an HMAC of the key under a random salt kept in
 * the data dir (0600), so the fingerprint is stable for this installation and reveals nothing of the
 * key (not even to someone holding a list of candidate keys, without the salt).
 */
export type { Payer, PayerKind } from '../core/ports/ledger.js';

/** Cloud-provider switches of the engines we know: the account of that provider pays. */
const CLOUD_SWITCHES: ReadonlyArray<{ env: string; id: string }> = [
  { env: 'CLAUDE_CODE_USE_BEDROCK', id: 'bedrock' },
  { env: 'CLAUDE_CODE_USE_VERTEX', id: 'vertex' },
  { env: 'GOOGLE_GENAI_USE_VERTEXAI', id: 'vertex' },
];

const truthy = (value: string | undefined) => value !== undefined && /^(1|true|yes)$/i.test(value.trim());

export function payerOf(
  credential: ResolvedCredential | null,
  env: Readonly<Record<string, string | undefined>>,
  salt: Buffer,
): Payer {
  const cloud = CLOUD_SWITCHES.find((s) => truthy(env[s.env]));
  if (cloud) return { kind: 'cloud', id: cloud.id };
  if (!credential) return { kind: 'unknown', id: null };
  if (credential.kind === 'cloud') return { kind: 'cloud', id: null };
  if (credential.kind === 'subscription') return { kind: 'subscription', id: null };
  const value = env[credential.env];
  if (!value) return { kind: 'api-key', id: null };
  return {
    kind: 'api-key',
    id: `key:${createHmac('sha256', salt).update(value).digest('hex').slice(0, 12)}`,
  };
}

/** The installation's fingerprint salt, created on first use. */
export const loadSalt = (dataDir: string): Buffer => loadKeyFile(dataDir, 'payer-salt');

/**
 * A random 32-byte key kept in `<dataDir>/<name>` (hex, 0600), created on first use. Two processes
 * creating it at once keep the first one's; an unusable file (empty, short, not hex) is replaced.
 */
export function loadKeyFile(dataDir: string, name: string): Buffer {
  const file = join(dataDir, name);
  const read = (): Buffer | null => {
    try {
      const key = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
      return key.length >= 16 ? key : null;
    } catch {
      return null; // Not there yet.
    }
  };
  const existing = read();
  if (existing) return existing;
  const key = randomBytes(32);
  try {
    writeFileSync(file, key.toString('hex'), { mode: 0o600, flag: 'wx' });
    return key;
  } catch {
    const first = read();
    if (first) return first;
  }
  writeFileSync(file, key.toString('hex'), { mode: 0o600 });
  chmodSync(file, 0o600);
  return key;
}

/**
 * A session's payer from what its row keeps: the fingerprint says an API key, a cloud id says which
 * provider's account (a cloud switch wins over the credential, as in `payerOf`).
 */
export function sessionPayer(credentialKind: string | null, payerId: string | null): Payer {
  if (payerId?.startsWith('key:')) return { kind: 'api-key', id: payerId };
  if (payerId && CLOUD_SWITCHES.some((s) => s.id === payerId)) return { kind: 'cloud', id: payerId };
  const kind =
    credentialKind === 'api-key' || credentialKind === 'subscription' || credentialKind === 'cloud'
      ? credentialKind
      : 'unknown';
  return { kind, id: null };
}

export function describePayer(payer: { kind: PayerKind; id: string | null }): string {
  return payer.id ? `${payer.kind} ${payer.id}` : payer.kind;
}
