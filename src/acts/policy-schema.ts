import { z } from 'zod';
import { ACT_RULES } from './policy.js';
import { ACT_KINDS } from './types.js';

/** The config's schema of a merge policy (see policy.ts); loaded with the config's schema only. */
const branchPattern = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[^\s\0]+$/, 'a branch name or a pattern with *, without spaces');

export const policySchema = z
  .object({
    protectedBranches: z
      .array(branchPattern)
      .max(100)
      .optional()
      .describe(
        "Branches (a * matches any run of characters) no agent may push, merge, reset or delete on. Default: the repository's defaultBranch.",
      ),
    acts: z
      .partialRecord(z.enum(ACT_KINDS), z.enum(ACT_RULES))
      .optional()
      .describe(
        `Per kind of act: allow, deny, or deny-protected (denied on a protected branch). Kinds: ${ACT_KINDS.join(', ')}.`,
      ),
  })
  .strict();

export type PolicyInput = z.output<typeof policySchema>;
