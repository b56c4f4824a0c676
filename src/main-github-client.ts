import type { LoadedConfig } from './config/load.js';
import { githubCredential, githubUrls } from './gateway/credentials.js';
import type { GitHubClient, GitHubClientOptions } from './github-api/client.js';
import type { Logger } from './log/logger.js';

/**
 * The daemon's GitHub credential, as every part needs it: the gateway's token for a repository
 * (the App installation's, or the configured token) and the client the status tracker writes with.
 * The client (Octokit) is loaded on first use only: a CLI command that never talks to GitHub does
 * not pay for it, and a token needs no client to be handed to the gateway.
 */
export interface DaemonGitHubSource {
  mode: 'app' | 'token';
  tokenFor(repoFullName: string): Promise<string | undefined>;
  client(): Promise<GitHubClient>;
}

/** undefined: no App and no token anywhere (the gateway sends no credential; nothing is said on GitHub). */
export function daemonGitHub(
  loaded: LoadedConfig,
  env: Readonly<Record<string, string | undefined>>,
  logger: Logger,
): DaemonGitHubSource | undefined {
  const { github, gateway, credentials } = loaded.config;
  const token = github.token ?? githubCredential(env, credentials)?.value;
  const auth: GitHubClientOptions['auth'] | undefined = github.app
    ? {
        kind: 'app',
        appId: github.app.id,
        privateKey: github.app.privateKey,
        installationId: github.app.installationId,
      }
    : token
      ? { kind: 'token', token }
      : undefined;
  if (!auth) return undefined;
  let made: Promise<GitHubClient> | undefined;
  const client = () => {
    made ??= import('./github-api/client.js').then(({ createGitHubClient }) =>
      createGitHubClient({
        baseUrl: github.baseUrl ?? githubUrls(gateway.github).apiUrl,
        auth,
        pacing: github.pacing,
        logger,
        userAgent: 'the-loop',
        botLogin: github.botLogin,
      }),
    );
    return made;
  };
  return {
    mode: auth.kind,
    tokenFor: async (repo) => {
      if (auth.kind === 'token') return auth.token;
      try {
        return await (await client()).tokenFor(repo);
      } catch (error) {
        // The gateway then sends no credential: the upstream's 401 reaches the agent, the log says why.
        logger.warn('GitHub: no installation token for a repository', { repo, error });
        return undefined;
      }
    },
    client,
  };
}
