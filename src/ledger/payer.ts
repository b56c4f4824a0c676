import { createHmac, randomBytes } from 'node:crypto';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ResolvedCredential } from '../engines/env.js';

/**
 * Who pays for an engine's requests, from the credential the engine was given — by kind, never by
 * value. Two API keys are told apart by a fingerprint: an HMAC of the key under a random salt kept in
 * the data dir (0600), so the fingerprint is stable for this installation and reveals nothing of the
 * key (not even to someone holding a list of candidate keys, without the salt).
 */
export type PayerKind = 'api-key' | 'subscription' | 'cloud' | 'unknown';

export interface Payer {
  kind: PayerKind;
  /** `key:<12 hex>` for an API key, `bedrock` / `vertex` for a cloud account, null otherwise. */
  id: string | null;
}

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
export function loadSalt(dataDir: string): Buffer {
  const file = join(dataDir, 'payer-salt');
  const read = (): Buffer | null => {
    try {
      const salt = Buffer.from(readFileSync(file, 'utf8').trim(), 'hex');
      return salt.length >= 16 ? salt : null;
    } catch {
      return null; // Not there yet.
    }
  };
  const existing = read();
  if (existing) return existing;
  const salt = randomBytes(32);
  try {
    // `wx`: two processes creating it at once keep the first one's.
    writeFileSync(file, salt.toString('hex'), { mode: 0o600, flag: 'wx' });
    return salt;
  } catch {
    const first = read();
    if (first) return first;
  }
  // There but unusable (empty, short, not hex): replace it, never use a short salt.
  writeFileSync(file, salt.toString('hex'), { mode: 0o600 });
  chmodSync(file, 0o600);
  return salt;
}

export function describePayer(payer: { kind: PayerKind; id: string | null }): string {
  return payer.id ? `${payer.kind} ${payer.id}` : payer.kind;
}
