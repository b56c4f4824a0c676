import { createHash } from 'node:crypto';
import { closeSync, mkdirSync, openSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { REFUSALS_FILE } from '../acts/hook.js';
import type { Config } from '../config/schema.js';
import { LoopError } from '../core/errors.js';
import { parseWorkItem } from '../core/work-item.js';
import type { EnginePreset } from '../engines/preset.js';
import { whichBinary } from '../engines/which.js';
import {
  githubUrls,
  holdsGitHubCredential,
  modelCredential,
  usesCloudCredential,
} from '../gateway/credentials.js';
import { engineSetup, type GatewayEndpoint, permissionModeOf } from '../gateway/engine-env.js';
import { operatorGitIdentity, writeSessionFiles } from '../gateway/session-files.js';
import type { GatewayTokens } from '../gateway/tokens.js';
import type { Logger } from '../log/logger.js';
import type { PreparedEngine, PrepareEngineInput } from '../sessions/turn-types.js';
import { sessionHome } from './engine-home.js';
import { sandboxPlan, workspaceGitDirs } from './sandbox-view.js';

/**
 * What guards an engine, prepared before each turn: a capability token minted for the session,
 * the session's git and gh configuration pointing at the gateway, the engine's environment without
 * the real credentials, the permission mode, and the sandbox command its process tree runs under.
 */
export interface GuardDeps {
  dataDir: string;
  /** The config file (hidden from the sandbox: it may hold secrets). */
  configPath: string | null;
  config: Config;
  /** The daemon's environment (the operator's HOME, the credentials the gateway holds). */
  env: Readonly<Record<string, string | undefined>>;
  tokens: GatewayTokens;
  /** Where a token that could not be revoked is said (it stays valid until its session ends). */
  logger: Pick<Logger, 'error'>;
  /** The gateway as it listens now; undefined: not listening. */
  gateway(): GatewayEndpoint | undefined;
  /** Whether bubblewrap works here, and where it is. */
  bwrap(): { available: true; path: string } | { available: false; reason: string; hint: string };
  /** the-loop's own install (hook scripts, engines from npm): readable inside the sandbox. */
  packageRoot: string;
}

/** The sandbox that applies, from the config and what is installed (a clear error when `bwrap` cannot run). */
export function sandboxMode(deps: Pick<GuardDeps, 'config' | 'bwrap'>): {
  mode: 'bwrap' | 'none';
  path?: string;
  note?: string;
} {
  const wanted = deps.config.sandbox.mode;
  if (wanted === 'none') {
    return {
      mode: 'none',
      note: 'no sandbox (sandbox.mode: none): engines see the whole machine as this user',
    };
  }
  const found = deps.bwrap();
  if (found.available) return { mode: 'bwrap', path: found.path };
  if (wanted === 'bwrap') {
    throw new LoopError(
      'binary-missing',
      `sandbox.mode is bwrap, but bubblewrap cannot run: ${found.reason}`,
      {
        hint: found.hint,
      },
    );
  }
  return {
    mode: 'none',
    note: `no sandbox: bubblewrap cannot run here (${found.reason}); engines see the whole machine as this user. ${found.hint}`,
  };
}

/**
 * Prepare a turn's engine. `asked.gitDirs`: the workspace's git dirs, when the caller asked git
 * already (`workspaceGitDirs`, started while it waited for the guard's probes).
 */
export async function prepareEngine(
  deps: GuardDeps,
  input: PrepareEngineInput,
  asked: { gitDirs?: Promise<string[]> | undefined } = {},
): Promise<PreparedEngine> {
  const { session, preset } = input;
  const { config } = deps;
  const stateDir = join(deps.dataDir, 'sessions', session.slug);
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  const notes: string[] = [];
  const sandbox = sandboxMode(deps);
  if (sandbox.note) notes.push(sandbox.note);
  const cloud = usesCloudCredential(preset, deps.env, config.credentials);
  const endpoint = gatewayEndpoint(deps, notes);
  // The sandbox's one question to git (the workspace's git dirs) is asked now: git runs while the
  // token is minted and the session's files are written, instead of after them.
  const gitDirs = sandbox.mode === 'bwrap' ? (asked.gitDirs ?? workspaceGitDirs(session.cwd)) : undefined;
  if (endpoint && cloud) {
    notes.push(
      `the ${session.engine} engine uses a cloud credential (Bedrock/Vertex): the gateway cannot hold it, so it is in the engine's environment and its model requests are not metered at the wire`,
    );
  }
  const token = endpoint ? await deps.tokens.mint(session.id) : undefined;
  const urls = githubUrls(config.gateway.github);
  const files = endpoint
    ? writeSessionFiles(stateDir, {
        gatewayUrl: endpoint.url,
        githubHost: urls.host,
        identity: operatorGitIdentity(deps.env),
        socketPath: endpoint.socketPath,
      })
    : { gitConfigFile: join(stateDir, 'gitconfig'), ghConfigDir: join(stateDir, 'gh') };
  const servedPreset: EnginePreset = cloud ? { ...preset, gateway: undefined } : preset;
  const permissions = permissionModeOf(preset, sandbox.mode, endpoint !== undefined && !cloud);
  const setup = engineSetup({
    preset: servedPreset,
    env: input.env,
    gateway: endpoint,
    token,
    modelCredential: cloud ? undefined : modelCredential(preset, deps.env, config.credentials),
    githubToken: holdsGitHubCredential(config, deps.env),
    ...files,
    githubHost: urls.host,
    repository: repositoryOf(session.workItem),
    sandbox: sandbox.mode,
    permissions,
  });
  notes.push(...modelNotes(session.engine, preset, setup.guard, endpoint !== undefined && !cloud));
  // In the sandbox the engine's config dir is the session's own, not the operator's.
  const home =
    sandbox.mode === 'bwrap'
      ? sessionHome({
          preset,
          engine: session.engine,
          slug: session.slug,
          dataDir: deps.dataDir,
          env: setup.env,
        })
      : undefined;
  if (home) setup.env = home.env;
  if (permissions === 'default' && preset.permissions.bypass.args.length > 0) {
    notes.push(
      `the ${session.engine} engine runs in its default permission mode: tool calls that need an approval are refused (headless) or wait for a person (tmux)`,
    );
  }
  const bwrapPath = sandbox.path;
  const sandboxed =
    bwrapPath && gitDirs
      ? sandboxCommand(deps, {
          stateDir,
          session,
          preset,
          env: setup.env,
          bwrapPath,
          endpoint,
          gitDirs: await gitDirs,
        })
      : undefined;
  return {
    env: setup.env,
    args: setup.args,
    interactiveArgs: setup.interactiveArgs,
    guard: setup.guard,
    meter: setup.guard.gateway.model ? 'wire' : undefined,
    notes,
    launchKey: launchKeyOf(setup.guard, endpoint),
    release: token ? () => revokeTurnToken(deps, token) : undefined,
    sandbox: sandboxed,
  };
}

/** The guard and where the gateway is: a TUI started under other ones is not reused. */
const launchKeyOf = (guard: PreparedEngine['guard'], endpoint: GatewayEndpoint | undefined): string =>
  createHash('sha256')
    .update(JSON.stringify({ guard, gateway: endpoint?.url ?? null }))
    .digest('hex')
    .slice(0, 32);

/** The gateway as it listens now (undefined: not enabled, noted); enabled but not listening is an error. */
function gatewayEndpoint(
  deps: Pick<GuardDeps, 'config' | 'gateway'>,
  notes: string[],
): GatewayEndpoint | undefined {
  if (!deps.config.gateway.enabled) {
    notes.push(
      'no gateway (gateway.enabled: false): the engine holds its credentials, and acts are judged from commands only',
    );
    return undefined;
  }
  const endpoint = deps.gateway();
  if (!endpoint) {
    throw new LoopError('internal', 'the gateway is enabled but not listening', {
      hint: 'Start the daemon (or `the-loop run`) again; set gateway.enabled: false to run engines without it.',
    });
  }
  return endpoint;
}

/** The turn's token revoked once its engine is gone; a failure is logged, never thrown at the turn. */
async function revokeTurnToken(deps: Pick<GuardDeps, 'tokens' | 'logger'>, token: string): Promise<void> {
  try {
    await deps.tokens.revoke(token);
  } catch (error) {
    deps.logger.error("could not revoke a turn's capability token (it stays valid until its session ends)", {
      error,
    });
  }
}

/** What the turn must say of the engine's model API when the gateway does not serve it. */
function modelNotes(
  engine: string,
  preset: EnginePreset,
  guard: PreparedEngine['guard'],
  served: boolean,
): string[] {
  if (!served || guard.gateway.model) return [];
  const own = guard.credentials.find((c) => c.held === 'engine');
  if (own) {
    return [
      `the ${engine} engine's API is not served by the gateway: its credential (${own.env}) is in its environment and its requests are not metered at the wire`,
    ];
  }
  return preset.gateway
    ? [
        `no ${preset.gateway.api} credential for the gateway to hold (set one in the daemon's environment or credentials.${preset.gateway.api}): the ${engine} engine talks to its API on its own login, not metered at the wire`,
      ]
    : [];
}

/** The checkouts of every configured repository but the work item's own. */
function otherRepoPaths(config: Config, workItem: string): string[] {
  const own = repositoryOf(workItem).toLowerCase();
  return Object.entries(config.repos)
    .filter(([name]) => name.toLowerCase() !== own)
    .map(([, repo]) => repo.path);
}

/** The checkout of the work item's own repository, when configured. */
function ownRepoPath(config: Config, workItem: string): string | undefined {
  const own = repositoryOf(workItem).toLowerCase();
  return Object.entries(config.repos).find(([name]) => name.toLowerCase() === own)?.[1].path;
}

const repositoryOf = (workItem: string): string => {
  const item = parseWorkItem(workItem);
  return `${item.owner}/${item.repo}`;
};

/** The sandbox command of a session: its plan is made once per turn, its argv per launch. */
function sandboxCommand(
  deps: GuardDeps,
  input: {
    stateDir: string;
    session: PrepareEngineInput['session'];
    preset: EnginePreset;
    env: Record<string, string>;
    bwrapPath: string;
    endpoint: GatewayEndpoint | undefined;
    gitDirs: readonly string[] | undefined;
  },
): PreparedEngine['sandbox'] {
  // Files the engine's hooks write must exist to be bound writable inside a read-only directory.
  const hookFiles = [join(input.stateDir, 'hooks.jsonl'), join(input.stateDir, REFUSALS_FILE)];
  for (const file of hookFiles) closeSync(openSync(file, 'a', 0o600));
  const binary = whichBinary(input.preset.binary, input.env.PATH, input.session.cwd);
  const binaryRoot = binary ? installRoot(realpathSafe(binary)) : undefined;
  const plan = sandboxPlan({
    workspace: input.session.cwd,
    stateDir: input.stateDir,
    hookFiles,
    dataDir: deps.dataDir,
    configPath: deps.configPath,
    packageRoot: deps.packageRoot,
    binaryRoot,
    socketPath: input.endpoint?.socketPath,
    engineWritable: input.preset.sandbox.writable,
    otherRepos: otherRepoPaths(deps.config, input.session.workItem),
    repository: ownRepoPath(deps.config, input.session.workItem),
    gitDirs: input.gitDirs,
    engineEnv: input.env,
    operatorEnv: deps.env,
    config: deps.config.sandbox,
  });
  return ({ terminal }) => ({ file: input.bwrapPath, args: plan.argv({ terminal }) });
}

/**
 * Where an engine's install must stay visible in the sandbox: only when the private /tmp would hide
 * it. A binary inside a node_modules tree needs the whole project that holds it (its package's
 * dependencies); any other, its own directory.
 */
export function installRoot(binary: string): string | undefined {
  if (!binary.startsWith('/tmp/')) return undefined;
  const at = binary.indexOf('/node_modules/');
  return at > 0 ? binary.slice(0, at) : dirname(binary);
}

function realpathSafe(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
