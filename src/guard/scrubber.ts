import type { LoadedConfig } from '../config/load.js';
import { secretParts } from '../config/secret-parts.js';
import { TOKEN_PATTERN } from '../core/capability-token.js';
import { credentialValues } from '../gateway/credentials.js';
import { SecretScrubber } from '../log/logger.js';
import { looksLikeKey } from '../log/secret-forms.js';

/**
 * The scrubber of a command: every credential the config and environment can give an engine or the
 * gateway (masked in every form), the other values read through `env:` into secret places (whole
 * only, unless they look like a key: a URL or a path there is ordinary text), and capability tokens.
 */
export function scrubberFor(loaded: LoadedConfig, env: Readonly<Record<string, string | undefined>>) {
  const scrubber = new SecretScrubber();
  for (const value of loaded.secretValues) scrubber.add(value, looksLikeKey(value) ? 'key' : 'exact');
  for (const value of credentialValues(loaded.engines, env, loaded.config.credentials, loaded.config.github))
    scrubber.add(value, looksLikeKey(value) ? 'key' : 'exact');
  scrubber.add(loaded.config.webhook.secret);
  // The store's URL and its password, also when the file holds them as written (not env:).
  const store = loaded.config.store;
  const parts = store.kind === 'postgres' ? secretParts(store.url) : [];
  if (parts.length > 1) for (const part of parts) scrubber.add(part, looksLikeKey(part) ? 'key' : 'exact');
  // The gateway's capability tokens, whichever process minted them.
  scrubber.addPattern(TOKEN_PATTERN);
  return scrubber;
}
