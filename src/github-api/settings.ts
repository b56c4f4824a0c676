import type { Config } from '../config/schema.js';
import { githubCredential, githubUrls } from '../gateway/credentials.js';
import type { GitHubClientOptions } from './client.js';

/**
 * What the daemon's GitHub client is made from, read from the config and the daemon's environment
 * (pure): the App (`github.app`), else a token (`github.token`, `credentials.github`, GH_TOKEN,
 * GITHUB_TOKEN); undefined when there is neither (then the daemon says nothing on GitHub).
 */
export type GitHubClientSettings = Pick<GitHubClientOptions, 'baseUrl' | 'auth' | 'pacing' | 'botLogin'>;

export function githubClientSettings(
  config: Pick<Config, 'github' | 'gateway' | 'credentials'>,
  env: Readonly<Record<string, string | undefined>>,
): GitHubClientSettings | undefined {
  const { github } = config;
  const auth: GitHubClientOptions['auth'] | undefined = github.app
    ? {
        kind: 'app',
        appId: github.app.id,
        privateKey: github.app.privateKey,
        installationId: github.app.installationId,
      }
    : tokenAuth(github.token ?? githubCredential(env, config.credentials)?.value);
  if (!auth) return undefined;
  return {
    baseUrl: github.baseUrl ?? githubUrls(config.gateway.github).apiUrl,
    auth,
    pacing: {
      writeGapMs: github.pacing.writeGapMs,
      commentGapMs: github.pacing.commentGapMs,
      writesPerHour: github.pacing.writesPerHour,
    },
    botLogin: github.botLogin,
  };
}

function tokenAuth(token: string | undefined): GitHubClientOptions['auth'] | undefined {
  return token ? { kind: 'token', token } : undefined;
}
