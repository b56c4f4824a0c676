import { copyFileSync, existsSync, lstatSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { LoopError } from '../core/errors.js';
import type { EnginePreset } from '../engines/preset.js';
import { expandPath } from '../sandbox/paths.js';

/** A seed file larger than this is not copied: settings are a few kB. */
const MAX_SEED_BYTES = 1024 * 1024;

/**
 * An engine's config directory of its own per session, in the sandbox: `<dataDir>/homes/<slug>/<engine>`.
 * Shared with nothing — not another session (which could otherwise plant hooks that run with its
 * token), not the operator's own use of the engine (which would run them unsandboxed) — and the
 * operator's login, keys and history stay out of the engine's sight. Made on the session's first
 * turn, seeded with the preset's `sandbox.home.seed` files (settings, never credentials) from the
 * directory the engine would have used.
 */
export function sessionHome(input: {
  preset: EnginePreset;
  engine: string;
  slug: string;
  dataDir: string;
  env: Record<string, string>;
}): { env: Record<string, string>; dir: string } | undefined {
  const home = input.preset.sandbox.home;
  if (!home) return undefined;
  if (!/^[a-z0-9-]+$/.test(input.slug) || !/^[a-z][a-z0-9-]*$/.test(input.engine)) {
    throw new LoopError('internal', `unsafe session home name ${JSON.stringify([input.slug, input.engine])}`);
  }
  const dir = join(input.dataDir, 'homes', input.slug, input.engine);
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const source = input.env[home.env] || expandPath(home.default, input.env, { unset: 'skip' });
    if (source) for (const file of home.seed) seed(join(source, file), join(dir, file));
  }
  return { env: { ...input.env, [home.env]: dir }, dir };
}

/** Copy one settings file, if it is a plain file of a sensible size (never through a symlink). */
function seed(from: string, to: string): void {
  let st: ReturnType<typeof lstatSync>;
  try {
    st = lstatSync(from);
  } catch {
    return; // The operator has none.
  }
  if (!st.isFile() || st.size > MAX_SEED_BYTES) return;
  mkdirSync(dirname(to), { recursive: true, mode: 0o700 });
  copyFileSync(from, to);
}
