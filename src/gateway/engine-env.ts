import type { TurnGuard } from '../core/ports/sessions.js';
import type { EnginePreset } from '../engines/preset.js';
import type { HeldCredential } from './credentials.js';

/**
 * The environment and arguments of an engine that the gateway serves, and what it runs under.
 * Pure: everything it needs is passed in. The real credentials never enter the result — their
 * variables are removed, and the one the engine reads its key from carries the session's
 * capability token instead.
 */

/** Variables that carry someone's authority to act: never passed to an engine the gateway serves. */
export const OPERATOR_CREDENTIAL_ENV = [
  'GH_TOKEN',
  'GITHUB_TOKEN',
  'GH_ENTERPRISE_TOKEN',
  'GITHUB_ENTERPRISE_TOKEN',
  'SSH_AUTH_SOCK',
  'GIT_ASKPASS',
  'SSH_ASKPASS',
  'NPM_TOKEN',
  'NODE_AUTH_TOKEN',
];

export interface GatewayEndpoint {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** The Unix socket `gh` reaches the API through. */
  socketPath: string | undefined;
}

export interface EngineSetupInput {
  preset: EnginePreset;
  /** The engine's environment as built from the allow-list (it may hold real credentials). */
  env: Record<string, string>;
  /** The gateway, when it serves this turn; undefined: engines talk to the world themselves. */
  gateway: GatewayEndpoint | undefined;
  token: string | undefined;
  /** The model credential the gateway holds for this engine (undefined: its own login passes through). */
  modelCredential: HeldCredential | undefined;
  /** Whether the gateway holds a GitHub token (git and gh go through it either way). */
  githubToken: boolean;
  /** The session's git global config and gh config dir (written by the caller). */
  gitConfigFile: string;
  ghConfigDir: string;
  /** The GitHub host as git and gh name it (github.com, or an enterprise host). */
  githubHost: string;
  /** The session's repository, `owner/name`: gh's default (its remotes point at the gateway now). */
  repository: string;
  sandbox: 'bwrap' | 'none';
  permissions: 'bypass' | 'default';
}

export interface EngineSetup {
  env: Record<string, string>;
  /** Added to the headless argv, and to the TUI's. */
  args: string[];
  interactiveArgs: string[];
  guard: TurnGuard;
}

/** The permission mode a preset asks for, given what guards the engine. */
export function permissionModeOf(
  preset: EnginePreset,
  sandbox: 'bwrap' | 'none',
  gateway: boolean,
): 'bypass' | 'default' {
  const mode = preset.permissions.mode;
  const { bypass } = preset.permissions;
  // An engine with no bypass to give runs as it is: saying "bypass" would promise nothing.
  const canBypass = bypass.args.length + bypass.interactiveArgs.length + Object.keys(bypass.env).length > 0;
  if (!canBypass) return 'default';
  if (mode === 'auto') return sandbox === 'bwrap' && gateway ? 'bypass' : 'default';
  return mode;
}

const fillGatewayUrl = (args: readonly string[], url: string) =>
  args.map((a) => a.split('{gatewayUrl}').join(url));

export function engineSetup(input: EngineSetupInput): EngineSetup {
  const { preset, gateway, token } = input;
  const env = { ...input.env };
  const credentials: TurnGuard['credentials'] = [];
  const served = gateway !== undefined && token !== undefined;
  let modelServed = false;
  let args: string[] = [];
  let interactiveArgs: string[] = [];
  if (served) {
    for (const name of OPERATOR_CREDENTIAL_ENV) delete env[name];
    const held = input.modelCredential;
    // The model API goes through the gateway only when it holds the key: an engine on its own login
    // (a subscription kept in its config, a Google login) talks to its API itself.
    if (preset.gateway && held) {
      // Every credential variable goes: the gateway holds the one that is used.
      for (const c of preset.credentials) delete env[c.env];
      modelServed = true;
      if (preset.gateway.baseUrlEnv) env[preset.gateway.baseUrlEnv] = `${gateway.url}/m/${token}`;
      env[held.tokenEnv] = token;
      credentials.push({ name: preset.gateway.api, kind: held.kind, env: held.source, held: 'gateway' });
      const extra = fillGatewayUrl(preset.gateway.args, `${gateway.url}/m/_`);
      args = [...extra];
      interactiveArgs = [...extra];
    } else {
      const own = preset.credentials.find((c) => env[c.env]);
      if (own) credentials.push({ name: own.env, kind: own.kind, env: own.env, held: 'engine' });
    }
    Object.assign(env, gitAndGhEnv(input, gateway, token));
    credentials.push({ name: 'github', kind: input.githubToken ? 'token' : 'none', held: 'gateway' });
  } else {
    const kind = preset.credentials.find((c) => env[c.env]);
    if (kind) credentials.push({ name: kind.env, kind: kind.kind, env: kind.env, held: 'engine' });
  }
  if (input.sandbox === 'bwrap') {
    // The sandbox's /tmp is private; a TMPDIR elsewhere would name a path the engine cannot see.
    env.TMPDIR = '/tmp';
  }
  if (input.permissions === 'bypass') {
    Object.assign(env, preset.permissions.bypass.env);
    args = [...args, ...preset.permissions.bypass.args];
    interactiveArgs = [...interactiveArgs, ...preset.permissions.bypass.interactiveArgs];
  }
  return {
    env,
    args,
    interactiveArgs,
    guard: {
      sandbox: input.sandbox,
      gateway: { model: modelServed, github: served },
      permissions: input.permissions,
      credentials,
    },
  };
}

/** git and gh pointed at the gateway: the token travels in the environment only, never in a URL. */
function gitAndGhEnv(
  input: EngineSetupInput,
  gateway: GatewayEndpoint,
  token: string,
): Record<string, string> {
  const env: Record<string, string> = {
    GIT_CONFIG_GLOBAL: input.gitConfigFile,
    // git sends this header on every request to the gateway's git prefix (git ≥ 2.31 reads
    // configuration from GIT_CONFIG_COUNT/KEY_n/VALUE_n).
    GIT_CONFIG_COUNT: '1',
    GIT_CONFIG_KEY_0: `http.${gateway.url}/git/.extraHeader`,
    GIT_CONFIG_VALUE_0: `Authorization: Bearer ${token}`,
    GIT_TERMINAL_PROMPT: '0',
    GH_CONFIG_DIR: input.ghConfigDir,
    GH_TOKEN: token,
    // git shows remotes rewritten to the gateway, which gh does not know for GitHub: name the repo.
    GH_REPO: input.githubHost === 'github.com' ? input.repository : `${input.githubHost}/${input.repository}`,
    GH_PROMPT_DISABLED: '1',
    GH_NO_UPDATE_NOTIFIER: '1',
    // Clients that take an API URL (octokit, actions toolkit) reach the same handler over TCP.
    GITHUB_API_URL: `${gateway.url}/gh`,
    GITHUB_TOKEN: token,
  };
  if (input.githubHost !== 'github.com') {
    env.GH_HOST = input.githubHost;
    env.GH_ENTERPRISE_TOKEN = token;
  }
  return env;
}
