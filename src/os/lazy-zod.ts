import { createRequire } from 'node:module';
import type * as Zod from 'zod';

/**
 * zod, loaded on first use (issue 16, bench:turn): the schemas of what a turn reads (the engines'
 * output, hook events, webhook payloads, stored manual deliveries) are built the first time one is
 * needed, not when their module is loaded — loading zod and building them took a `the-loop run`
 * ~100 ms before its engine could start, and a turn whose lines pass the hand-written checks never
 * needs them.
 *
 * In the CLI bundle, `require` is the bundle's own (bin/cli-load.js), which answers "zod" with the
 * copy bundled apart (dist/cli-zod.cjs) that every other module of the bundle uses. In tsc's dist/
 * (the daemon) and under the tests, modules are ES modules without `require`: zod's CommonJS build is
 * required beside them. zod 4 recognizes its schemas by their traits, not by identity, so a schema of
 * one build composes with and parses as one of the other.
 */
let loaded: typeof Zod.z | undefined;

export function lazyZod(): typeof Zod.z {
  if (loaded) return loaded;
  const load: NodeJS.Require = typeof require === 'function' ? require : createRequire(import.meta.url);
  loaded = (load('zod') as typeof Zod).z;
  return loaded;
}

/** A value built on its first use (a schema, a set of schemas), then kept. */
export function lazily<T>(build: (z: typeof Zod.z) => T): () => T {
  let value: T | undefined;
  return () => {
    value ??= build(lazyZod());
    return value;
  };
}

/**
 * An object of schemas whose fields are built together on the first read of any of them: a module
 * exports it as it would the object itself (`schemas.issues.safeParse(…)`) and loads no zod until then.
 */
export function lazyFields<T extends object>(
  keys: readonly (keyof T & string)[],
  build: (z: typeof Zod.z) => T,
): T {
  const built = lazily((z) => {
    const value = build(z);
    // A field left out of `keys` would read as absent (an event type unknown, so tolerated): never.
    const unlisted = Object.keys(value).filter((key) => !(keys as readonly string[]).includes(key));
    if (unlisted.length > 0) throw new Error(`lazyFields: ${unlisted.join(', ')} not listed`);
    return value;
  });
  const fields = {} as T;
  for (const key of keys) Object.defineProperty(fields, key, { get: () => built()[key], enumerable: true });
  return Object.freeze(fields);
}
