import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { writePrivateFile } from '../os/private-file.js';
import { identityKey, readIdentity, writeIdentity } from './identity-cache.js';

/**
 * The files that point a session's git and gh at the gateway, in the session's private state dir
 * (0600; read-only inside the sandbox). They carry no token: git gets it from the environment
 * (an extra header), gh from GH_TOKEN.
 */
export const GIT_CONFIG_FILE = 'gitconfig';
export const GH_CONFIG_DIR = 'gh';

/** A value in git's config syntax: quoted, with `\` and `"` escaped and newlines written as \n. */
export const gitConfigValue = (value: string): string =>
  `"${value
    .replace(/\\/g, '\\\\')
    .replace(/"/g, '\\"')
    .replace(/\n/g, '\\n')
    .replace(/[\0\r]/g, '')}"`;

/** The URL forms git accepts for a host, each sent to the gateway's git prefix instead. */
export function gitUrlForms(host: string): string[] {
  const bare = host.replace(/:\d+$/, '');
  return [`https://${host}/`, `http://${host}/`, `git@${bare}:`, `ssh://git@${bare}/`, `git://${bare}/`];
}

/** The session's global git config: GitHub's URLs rewritten to the gateway, no credential helper. */
export function gitConfigText(input: {
  gatewayUrl: string;
  githubHost: string;
  identity: { name?: string | undefined; email?: string | undefined };
}): string {
  const lines = [`[url ${gitConfigValue(`${input.gatewayUrl}/git/`)}]`];
  for (const form of gitUrlForms(input.githubHost)) lines.push(`\tinsteadOf = ${gitConfigValue(form)}`);
  // An empty helper resets the list: no helper of the system config may answer for the gateway.
  lines.push('[credential]', '\thelper = ""');
  if (input.identity.name || input.identity.email) {
    lines.push('[user]');
    if (input.identity.name) lines.push(`\tname = ${gitConfigValue(input.identity.name)}`);
    if (input.identity.email) lines.push(`\temail = ${gitConfigValue(input.identity.email)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** Write the session's git config and gh config; returns their paths. */
export function writeSessionFiles(
  stateDir: string,
  input: Parameters<typeof gitConfigText>[0] & { socketPath: string | undefined },
): { gitConfigFile: string; ghConfigDir: string } {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const gitConfigFile = writePrivateFile(stateDir, GIT_CONFIG_FILE, gitConfigText(input));
  const ghConfigDir = join(stateDir, GH_CONFIG_DIR);
  mkdirSync(ghConfigDir, { recursive: true, mode: 0o700 });
  // JSON strings are YAML double-quoted strings.
  const gh = [
    'version: "1"',
    'git_protocol: https',
    'prompt: disabled',
    ...(input.socketPath ? [`http_unix_socket: ${JSON.stringify(input.socketPath)}`] : []),
  ];
  writePrivateFile(ghConfigDir, 'config.yml', `${gh.join('\n')}\n`);
  return { gitConfigFile, ghConfigDir };
}

type Identity = { name?: string | undefined; email?: string | undefined };
let identity: Identity | undefined;

/** Both keys in one git call: `-z` entries are `key\nvalue\0`, and a key's last value wins (as `--get`'s). */
const IDENTITY_ARGS = ['config', '--global', '-z', '--get-regexp', '^user\\.(name|email)$'];
const gitEnv = (env: Readonly<Record<string, string | undefined>>) => ({
  PATH: env.PATH ?? '/usr/bin:/bin',
  HOME: env.HOME ?? '',
});

/** The identity in `git config -z --get-regexp` output (a key without a value, or an empty one: none). */
export function identityFromGitConfig(out: string): Identity {
  const found: Identity = {};
  for (const entry of out.split('\0')) {
    const nl = entry.indexOf('\n');
    if (nl < 0) continue;
    const key = entry.slice(0, nl).toLowerCase();
    const value = entry.slice(nl + 1).trim() || undefined;
    if (key === 'user.name') found.name = value;
    else if (key === 'user.email') found.email = value;
  }
  return { name: found.name, email: found.email };
}

/**
 * The identity kept for this environment (identity-cache.ts), and where to keep git's answer: `cacheDir`
 * unset, git is asked once per process.
 */
function kept(env: Readonly<Record<string, string | undefined>>, cacheDir: string | undefined) {
  const key = cacheDir ? identityKey(env) : null;
  const known = cacheDir && key ? readIdentity(cacheDir, key) : undefined;
  const keep = (found: Identity) => {
    if (cacheDir && key) writeIdentity(cacheDir, key, found);
    return found;
  };
  return { known, keep };
}

/** The operator's git identity (commits the agent makes carry it); asked of git once per process (until git answers cleanly). */
export function operatorGitIdentity(
  env: Readonly<Record<string, string | undefined>>,
  cacheDir?: string,
): Identity {
  if (identity) return identity;
  const { known, keep } = kept(env, cacheDir);
  if (known) {
    identity = known;
    return identity;
  }
  const run = spawnSync('git', IDENTITY_ARGS, {
    encoding: 'utf8',
    env: gitEnv(env),
    stdio: ['ignore', 'pipe', 'ignore'],
    timeout: 5000,
  });
  const answer = identityAnswer(
    { status: run.status, signal: run.signal, failed: run.error !== undefined },
    run.stdout ?? '',
  );
  if (!answer.clean) return answer.identity;
  identity = keep(answer.identity);
  return identity;
}

/**
 * What git's answer says: an identity (exit 0), none set (exit 1, no signal) — both clean, kept
 * for the process and across processes; anything else (no git, a timeout, a kill, EAGAIN, another
 * exit) is no identity for this turn, never kept: the next turn asks again.
 */
export function identityAnswer(
  run: { status: number | null; signal: string | null; failed: boolean },
  stdout: string,
): { identity: Identity; clean: boolean } {
  const clean = !run.failed && run.signal === null && (run.status === 0 || run.status === 1);
  return { identity: clean && run.status === 0 ? identityFromGitConfig(stdout) : {}, clean };
}

let asking: Promise<Identity> | undefined;

/**
 * The same answer as `operatorGitIdentity`, without blocking; it lands in the same cache (started
 * before a turn is prepared, it overlaps the rest of the start).
 */
export function operatorGitIdentityAsync(
  env: Readonly<Record<string, string | undefined>>,
  cacheDir?: string,
): Promise<Identity> {
  if (identity) return Promise.resolve(identity);
  const { known, keep } = kept(env, cacheDir);
  if (known) {
    identity = known;
    return Promise.resolve(identity);
  }
  asking ??= new Promise<Identity>((resolve) => {
    const child = execFile(
      'git',
      IDENTITY_ARGS,
      { encoding: 'utf8', env: gitEnv(env), timeout: 5000 },
      (error, stdout) => {
        // execFile's error: `code` is the exit status, a string when git did not run (ENOENT, EAGAIN).
        const code = error ? (error as { code?: unknown }).code : 0;
        const answer = identityAnswer(
          {
            status: typeof code === 'number' ? code : null,
            signal: error?.signal ?? null,
            failed: typeof code !== 'number' || error?.killed === true,
          },
          stdout,
        );
        asking = undefined;
        if (!answer.clean) return resolve(identity ?? answer.identity);
        // A synchronous answer given meanwhile stays the answer.
        identity ??= keep(answer.identity);
        resolve(identity);
      },
    );
    child.stdin?.end();
  });
  return asking;
}
