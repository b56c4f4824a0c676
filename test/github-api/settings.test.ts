/** Which client the config makes: the App, a token from the config or the environment, or none. */
import { describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { githubClientSettings } from '../../src/github-api/settings.js';
import { testAppKey } from '../helpers/fake-app-auth.js';

const parse = (config: Record<string, unknown>) => configSchema.parse(config);

describe('githubClientSettings', () => {
  it('is none without an App or a token', () => {
    expect(githubClientSettings(parse({}), {})).toBeUndefined();
  });

  it('takes a token from github.token, else credentials.github, else GH_TOKEN', () => {
    expect(githubClientSettings(parse({ github: { token: 'ghp_fromGithubToken' } }), {})?.auth).toEqual({
      kind: 'token',
      token: 'ghp_fromGithubToken',
    });
    expect(githubClientSettings(parse({ credentials: { github: 'ghp_fromCredentials' } }), {})?.auth).toEqual(
      {
        kind: 'token',
        token: 'ghp_fromCredentials',
      },
    );
    const fromEnv = githubClientSettings(parse({}), { GH_TOKEN: 'ghp_fromTheEnvironment' });
    expect(fromEnv).toEqual({
      baseUrl: 'https://api.github.com',
      auth: { kind: 'token', token: 'ghp_fromTheEnvironment' },
      pacing: { writeGapMs: 1000, commentGapMs: 3000, writesPerHour: 450 },
      botLogin: undefined,
    });
  });

  it("prefers the App, and finds the API beside the gateway's GitHub host", () => {
    const { privateKey } = testAppKey();
    const config = parse({
      github: { app: { id: 5, privateKey }, botLogin: 'loop[bot]', pacing: { writeGapMs: 200 } },
      gateway: { github: { host: 'ghe.example.com' } },
    });
    expect(githubClientSettings(config, { GH_TOKEN: 'ghp_ignored00' })).toEqual({
      baseUrl: 'https://ghe.example.com/api/v3',
      auth: { kind: 'app', appId: 5, privateKey, installationId: undefined },
      pacing: { writeGapMs: 200, commentGapMs: 3000, writesPerHour: 450 },
      botLogin: 'loop[bot]',
    });
    expect(
      githubClientSettings(parse({ github: { baseUrl: 'http://127.0.0.1:9/' } }), {
        GH_TOKEN: 'ghp_x1234567',
      })?.baseUrl,
    ).toBe('http://127.0.0.1:9');
  });
});
