import { execFile } from 'node:child_process';
import { relative } from 'node:path';
import { findWorkTree } from '../config/data-dir.js';
import type { LoadedConfig } from '../config/load.js';
import { SAFE_GIT_ARGS, safeGitEnv } from '../workspaces/git-runner.js';

/**
 * What `doctor` says of where state and secrets live: the config file (and the secrets written into
 * it rather than as env:NAME) and the data dir, each with the git work tree it is in, if any. A config
 * holding a secret inside a work tree and not git-ignored, and any data dir inside one, are warnings:
 * an agent's `git add -A && git push` there publishes them.
 */
export interface StateReport {
  config: {
    path: string | null;
    workTree: string | null;
    /** Key paths of the secrets written in the file. */
    secrets: string[];
    /** Whether git ignores the file (null: not in a work tree, or git could not say). */
    ignored: boolean | null;
  };
  dataDir: { path: string; workTree: string | null };
  warnings: string[];
}

export type StatePaths = Pick<LoadedConfig, 'path' | 'dataDir' | 'dataDirWorkTree' | 'literalSecrets'>;

/** `git check-ignore` for one path: true (ignored), false (not, or tracked), null (git could not say). */
export function gitIgnores(
  workTree: string,
  path: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<boolean | null> {
  return new Promise((resolve) => {
    execFile(
      'git',
      [...SAFE_GIT_ARGS, 'check-ignore', '-q', '--', relative(workTree, path)],
      { cwd: workTree, env: safeGitEnv(env), timeout: 15_000 },
      (error) => {
        if (!error) resolve(true);
        else resolve(error.code === 1 ? false : null);
      },
    );
  });
}

/** Pure: the warnings the facts call for. */
export function stateWarnings(report: Omit<StateReport, 'warnings'>): string[] {
  const warnings: string[] = [];
  const { config, dataDir } = report;
  if (config.path && config.workTree && config.secrets.length > 0 && config.ignored !== true) {
    warnings.push(
      `the config ${config.path} holds secrets (${config.secrets.join(', ')}) and is inside the git work tree ${config.workTree}, ${config.ignored === false ? 'not git-ignored (or tracked)' : 'and git could not say whether it is ignored'}: an agent's \`git add -A && git push\` there would publish them. ` +
        'Add its directory to .gitignore (a `.gitignore` of `*` in it), or write the secrets as env:NAME.',
    );
  }
  if (dataDir.workTree) {
    warnings.push(
      `the data dir ${dataDir.path} is inside the git work tree ${dataDir.workTree}: it holds the registry, the log and keys. Move it out of the repository (dataDir, --data-dir or THE_LOOP_DATA_DIR).`,
    );
  }
  return warnings;
}

export async function stateReport(
  paths: StatePaths,
  env: Readonly<Record<string, string | undefined>>,
): Promise<StateReport> {
  const workTree = paths.path ? findWorkTree(paths.path) : null;
  const facts = {
    config: {
      path: paths.path,
      workTree,
      secrets: paths.literalSecrets,
      ignored: paths.path && workTree ? await gitIgnores(workTree, paths.path, env) : null,
    },
    dataDir: { path: paths.dataDir, workTree: paths.dataDirWorkTree },
  };
  return { ...facts, warnings: stateWarnings(facts) };
}

export function formatStateReport(report: StateReport): string {
  const lines = [
    `config   ${report.config.path ?? 'none (defaults)'}${report.config.workTree ? ` · in the git work tree ${report.config.workTree}${report.config.ignored ? ', git-ignored' : ''}` : ''}`,
    `data dir ${report.dataDir.path}${report.dataDir.workTree ? ` · in the git work tree ${report.dataDir.workTree}` : ' · outside any git work tree'}`,
    ...report.warnings.map((w) => `  ⚠ ${w}`),
  ];
  return `${lines.join('\n')}\n`;
}
