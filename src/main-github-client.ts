import type { LoadedConfig } from './config/load.js';
import type { GitHubClient } from './github-api/client.js';
import { githubClientSettings } from './github-api/settings.js';
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
  /** The upstream refused the credential (401): an installation token is minted again next time. */
  tokenRefused(repoFullName: string): void;
  client(): Promise<GitHubClient>;
  /** Stops the client's timers (the daemon's dispose). */
  close(): void;
}

/** undefined: no App and no token anywhere (the gateway sends no credential; nothing is said on GitHub). */
export function daemonGitHub(
  loaded: LoadedConfig,
  env: Readonly<Record<string, string | undefined>>,
  logger: Logger,
  /** Each installation token the gateway is handed is masked from then on, like every credential. */
  addSecret: (value: string) => void,
): DaemonGitHubSource | undefined {
  const settings = githubClientSettings(loaded.config, env);
  if (!settings) return undefined;
  const { auth } = settings;
  let made: Promise<GitHubClient> | undefined;
  let loadedClient: GitHubClient | undefined;
  const client = () => {
    made ??= import('./github-api/client.js').then(({ createGitHubClient }) => {
      loadedClient = createGitHubClient({ ...settings, logger, userAgent: 'the-loop' });
      return loadedClient;
    });
    return made;
  };
  return {
    mode: auth.kind,
    tokenFor: async (repo) => {
      if (auth.kind === 'token') return auth.token;
      try {
        const token = await (await client()).tokenFor(repo);
        if (token) addSecret(token);
        return token;
      } catch (error) {
        // The gateway then sends no credential: the upstream's 401 reaches the agent, the log says why.
        logger.warn('GitHub: no installation token for a repository', { repo, error });
        return undefined;
      }
    },
    tokenRefused: (repo) => loadedClient?.tokenRefused(repo),
    client,
    close: () => loadedClient?.close(),
  };
}
