import { createPrivateKey } from 'node:crypto';
import type { GitHubConfig } from './github-schema.js';

/**
 * The secrets of `github:` (the App's key, the token), without zod: the scrubber of every command
 * reads them, and a command on a cached config never loads the schemas.
 */

/**
 * Whether `pem` is an RSA private key node:crypto reads (GitHub Apps' keys are PKCS#1 RSA PEM).
 * Never throws and never says what the text was: the message of a failed parse may quote it.
 */
export function isRsaPrivateKey(pem: string): boolean {
  try {
    return createPrivateKey({ key: pem, format: 'pem' }).asymmetricKeyType === 'rsa';
  } catch {
    return false;
  }
}

/** The secret values of `github:` (the App's key, the token), for the scrubber. */
export function githubSecretValues(github: GitHubConfig | undefined): string[] {
  const values: string[] = [];
  if (github?.token) values.push(github.token);
  const pem = github?.app?.privateKey;
  if (pem) {
    values.push(pem);
    // The key's body as one line: what a log or a quoted file would show of it in pieces.
    const body = pem.replace(/-----[A-Z ]+-----/g, '').replace(/\s+/g, '');
    if (body.length >= 16) values.push(body);
  }
  return values;
}
