/** The TypeScript compiler API, shared by the scan's parts. */
import { createRequire } from 'node:module';
import type * as TS from 'typescript';

// Required, not imported: tsx sends an `import` of the compiler's one 9 MB file through its
// transform (1.3 s here); a plain require loads it in a third of that.
export const ts = createRequire(import.meta.url)('typescript') as typeof TS;
export type { TS };
