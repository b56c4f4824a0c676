import { type Handler, parseOptions } from './context.js';
import {
  classifyApplyPatch,
  classifyCopy,
  classifyDd,
  classifyFileOperands,
  classifyFind,
  classifyRm,
} from './files.js';
import { classifyGit } from './git.js';
import { classifyGh } from './github.js';
import { classifyCurl } from './github-api.js';
import { classifyNpx, PUBLISH_HANDLERS } from './publish.js';
import { interpreterName, WRAPPER_HANDLERS } from './wrappers.js';

/**
 * The programs the classifier knows, by folded lower-case name. A program not listed is not an act
 * (most commands are not); a program listed under two concerns (deno: eval and publish) runs both.
 */

/** `uv run cmd`, `poetry run cmd`, `bundle exec cmd`, …: the words after the subcommand are a command. */
function runsSubcommand(subs: string[], valued: string[] = []): Handler {
  const valuedSet = new Set(valued);
  return (run) => {
    const head = parseOptions(run.args, valuedSet, true);
    const sub = run.args[head.rest];
    if (!sub || !subs.includes(sub.f)) return;
    const after = run.args.slice(head.rest + 1);
    const o = parseOptions(after, valuedSet, true);
    run.argv(after.slice(o.rest), 'wrapper');
  };
}

const ENV_VALUED = [
  '-n',
  '--name',
  '-p',
  '--prefix',
  '--with',
  '--python',
  '--package',
  '--project',
  '--directory',
  '--env-file',
  '--extra',
  '--group',
  '-e',
  '--environment',
];

const TABLE: [string, Handler][] = [
  ['git', classifyGit],
  ['hub', classifyGit],
  ['gh', classifyGh],
  ['curl', classifyCurl],
  ['rm', classifyRm],
  ['find', classifyFind],
  ['cp', classifyCopy],
  ['mv', classifyCopy],
  ['install', classifyCopy],
  ['ln', classifyCopy],
  ['tee', classifyFileOperands],
  ['touch', classifyFileOperands],
  ['truncate', classifyFileOperands],
  ['chmod', classifyFileOperands],
  ['dd', classifyDd],
  ['apply_patch', classifyApplyPatch],
  ['applypatch', classifyApplyPatch],
  ['uvx', classifyNpx],
  ['uv', runsSubcommand(['run'], ENV_VALUED)],
  ['poetry', runsSubcommand(['run'], ENV_VALUED)],
  ['pipenv', runsSubcommand(['run'], ENV_VALUED)],
  ['pdm', runsSubcommand(['run'], ENV_VALUED)],
  ['hatch', runsSubcommand(['run'], ENV_VALUED)],
  ['rye', runsSubcommand(['run'], ENV_VALUED)],
  ['pixi', runsSubcommand(['run', 'exec'], ENV_VALUED)],
  ['conda', runsSubcommand(['run'], ENV_VALUED)],
  ['mamba', runsSubcommand(['run'], ENV_VALUED)],
  ['bundle', runsSubcommand(['exec'], ENV_VALUED)],
  ...Object.entries(WRAPPER_HANDLERS),
  ...Object.entries(PUBLISH_HANDLERS),
];

const HANDLERS = new Map<string, Handler[]>();
for (const [name, handler] of TABLE) HANDLERS.set(name, [...(HANDLERS.get(name) ?? []), handler]);

/** The handlers for a program name (folded, lower-cased, without its directory). */
export function handlersFor(name: string): { name: string; handlers: Handler[] } | undefined {
  const direct = HANDLERS.get(name);
  if (direct) return { name, handlers: direct };
  const versioned = interpreterName(name);
  const handlers = versioned === undefined ? undefined : HANDLERS.get(versioned);
  return handlers && versioned !== undefined ? { name: versioned, handlers } : undefined;
}
