import { fileURLToPath } from 'node:url';
import type { ActStore } from './acts/audit.js';
import type { Policy } from './acts/decide.js';
import { stateHome } from './config/data-dir.js';
import type { LoadedConfig } from './config/load.js';
import type { BudgetStore } from './core/ports/budgets.js';
import type { SessionStore } from './core/ports/sessions.js';
import type { TokenStore } from './core/ports/tokens.js';
import { createGatewayPorts, type DaemonPortsDeps } from './gateway/daemon-ports.js';
import { createGitHandler } from './gateway/git/git-proxy.js';
import { createGitHubApiHandler } from './gateway/github/api-proxy.js';
import { GatewayService } from './gateway/listen.js';
import { createModelHandler } from './gateway/models/model-proxy.js';
import { operatorGitIdentityAsync } from './gateway/session-files.js';
import { GatewayTokens } from './gateway/tokens.js';
import { daemonGit } from './guard/git-jail.js';
import { prepareEngine } from './guard/prepare.js';
import { workspaceGitDirs } from './guard/sandbox-view.js';
import type { Ledger } from './ledger/ledger.js';
import type { Logger } from './log/logger.js';
import { detectBwrap, detectBwrapAsync } from './sandbox/detect.js';
import { probeCacheDir } from './sandbox/probe-cache.js';
import type { PreparedEngine, PrepareEngineInput } from './sessions/turn-types.js';
import type { GitRunner } from './workspaces/git-runner.js';

/**
 * The composition of what guards engines (part of the composition root, beside main.ts): the
 * gateway's tokens, its daemon-side ports and its listeners, and the preparation of each turn's
 * engine (token, environment, sandbox, permission mode).
 */
export { revokingStore } from './gateway/revoking-store.js';

export interface Guard {
  tokens: GatewayTokens;
  gateway: GatewayService;
  prepare(input: PrepareEngineInput): Promise<PreparedEngine>;
  /**
   * Start what preparing a turn asks of the machine once per process (does bubblewrap run here, the
   * operator's git identity), all at once and without blocking; `prepare` waits for it. Called early
   * (before dispatching), the probes overlap the rest of the start instead of delaying the engine.
   * `hint.cwd`: the workspace the next turn is expected to run in (`the-loop run`, holding the
   * dispatcher lock): its git dirs are asked now, and used by the next turn if it runs there.
   */
  warm(hint?: { cwd?: string | undefined }): Promise<void>;
  /**
   * Drop the workspace's git dirs asked by `warm`: an engine ran there since (a turn adopted or
   * recovered), so the next turn asks git again.
   */
  forgetWarmed(): void;
  /** How the daemon runs git in repositories agents wrote to (jailed where bubblewrap runs). */
  git: GitRunner;
}

export const PACKAGE_ROOT = fileURLToPath(new URL('..', import.meta.url));

export function createGuard(deps: {
  loaded: LoadedConfig;
  env: Readonly<Record<string, string | undefined>>;
  tokenStore: TokenStore;
  store: SessionStore;
  ledger: Ledger;
  acts: ActStore;
  budgets: BudgetStore;
  logger: Logger;
  policyFor: (workItem: string) => Policy;
  /** The daemon's GitHub client: the gateway sends its credential for each repository (the App's installation token). */
  github?: DaemonPortsDeps['github'];
}): Guard {
  const { loaded } = deps;
  const tokens = new GatewayTokens(deps.tokenStore);
  const ports = createGatewayPorts({
    store: deps.store,
    ledger: deps.ledger,
    acts: deps.acts,
    budgets: deps.budgets,
    logger: deps.logger,
    config: loaded.config,
    engines: loaded.engines,
    env: deps.env,
    policyFor: deps.policyFor,
    github: deps.github,
  });
  // Every handler gives up on a silent upstream after the same time (the listeners wait longer).
  const idleTimeoutMs = loaded.config.gateway.idleTimeoutSeconds * 1000;
  const maxBody = loaded.config.gateway.maxBodyBytes;
  const model = createModelHandler({ idleTimeoutMs, maxRequestBytes: maxBody });
  const github = createGitHubApiHandler({ idleTimeoutMs, maxBodyBytes: maxBody });
  const gateway = new GatewayService({
    config: loaded.config,
    dataDir: loaded.dataDir,
    env: deps.env,
    logger: deps.logger,
    store: deps.store,
    tokens,
    ports,
    routes: {
      git: createGitHandler({ idleTimeoutMs }),
      github,
      model,
    },
    // Pooled keep-alive connections to the model APIs and to GitHub's go with the listeners.
    onClose: () => {
      model.close();
      github.close();
    },
  });
  const git = daemonGit({
    sandbox: loaded.config.sandbox,
    dataDir: loaded.dataDir,
    configPath: loaded.path,
    env: deps.env,
  });
  const probes = guardProbes(loaded, deps.env);
  const { warm, forgetWarmed } = probes;
  return {
    tokens,
    gateway,
    git,
    warm,
    forgetWarmed,
    prepare: async (input) => {
      const gitDirs = probes.gitDirs(input.session.cwd);
      await warm();
      return prepareEngine(
        {
          dataDir: loaded.dataDir,
          configPath: loaded.path,
          config: loaded.config,
          env: deps.env,
          tokens,
          logger: deps.logger,
          gateway: () => gateway.endpoint(),
          bwrap: () => detectBwrap(probes.bwrapOptions),
          packageRoot: PACKAGE_ROOT,
        },
        input,
        { gitDirs },
      );
    },
  };
}

/**
 * What preparing a turn asks of the machine: the once-per-process probes (`Guard.warm`) and the
 * workspace's git dirs.
 */
export function guardProbes(
  loaded: Pick<LoadedConfig, 'config'>,
  env: Readonly<Record<string, string | undefined>>,
) {
  // A working bwrap's probe and the operator's git identity are kept under the state home, out of
  // every sandbox's reach (not at all with THE_LOOP_PROBE_CACHE=0).
  const probeCache = probeCacheDir(stateHome(env), env);
  const bwrapOptions = { path: loaded.config.sandbox.bwrap, env, cacheDir: probeCache };
  const sandboxed = loaded.config.sandbox.mode !== 'none';
  let warming: Promise<void> | undefined;
  // The sandbox's question to git for the workspace a caller expects, asked once (see warm).
  let early: { cwd: string; gitDirs: Promise<string[]> } | undefined;
  const warm = (hint?: { cwd?: string | undefined }) => {
    if (hint?.cwd && sandboxed && !early) early = { cwd: hint.cwd, gitDirs: workspaceGitDirs(hint.cwd) };
    warming ??= Promise.all([
      sandboxed ? detectBwrapAsync(bwrapOptions) : undefined,
      loaded.config.gateway.enabled ? operatorGitIdentityAsync(env, probeCache) : undefined,
    ]).then(
      () => undefined,
      // Never an error here: prepare asks again, synchronously, and reports what it finds.
      () => undefined,
    );
    return warming;
  };
  /**
   * The sandbox's question to git (the workspace's git dirs), started before the probes are
   * awaited — or since warm, for this very workspace; it is answered the same whenever it is asked
   * (no engine runs in the workspace meanwhile). Undefined: no sandbox.
   */
  const gitDirs = (cwd: string): Promise<string[]> | undefined => {
    const asked = early?.cwd === cwd ? early.gitDirs : undefined;
    early = undefined;
    return sandboxed ? (asked ?? workspaceGitDirs(cwd)) : undefined;
  };
  const forgetWarmed = () => {
    early = undefined;
  };
  return { bwrapOptions, warm, gitDirs, forgetWarmed };
}
