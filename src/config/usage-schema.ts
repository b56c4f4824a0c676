import { z } from 'zod';

/**
 * `usage:` — where the daemon finds the transcripts it imports as they are written (src/ledger/watch.ts).
 * A directory is written absolute, `~/…`, or relative to the config file; it need not exist yet.
 */
const watchDir = z
  .string()
  .min(1, 'a directory, not an empty string')
  .max(4096, 'a directory path of at most 4096 characters')
  .refine((d) => !/[\0\r\n]/.test(d), 'a directory path has no NUL or line break')
  .refine(
    (d) => !/^~[^/]/.test(d),
    '~user is not supported: write ~/…, an absolute path, or one relative to the config file',
  )
  .describe('A directory of Claude Code transcripts (`*.jsonl`, in any subdirectory).');

export const usageSchema = z
  .object({
    watch: z
      .array(watchDir)
      .max(100, 'at most 100 directories')
      .default([])
      .describe(
        "More directories of Claude Code transcripts the daemon imports as they are written (besides Claude Code's projects folders, see watchClaude). Absolute, ~/…, or relative to the config file; one that does not exist yet is watched once it does.",
      ),
    watchClaude: z
      .boolean()
      .default(true)
      .describe(
        "Watch Claude Code's projects folders where the daemon's sessions write their transcripts: $CLAUDE_CONFIG_DIR/projects (else ~/.claude/projects and ~/.config/claude/projects) and the sessions' own config dirs in the sandbox (<dataDir>/homes/<slug>/<engine>/projects).",
      ),
    recheckSeconds: z
      .number()
      .min(1)
      .max(3600)
      .default(30)
      .describe(
        'How often every watched directory is walked again, a backstop for changes file events miss (network file systems, a full inotify table, directories that appear later).',
      ),
  })
  .strict()
  .prefault({})
  .describe(
    'The daemon imports transcripts as they are written, so `the-loop usage` is current without `usage scan`.',
  );
