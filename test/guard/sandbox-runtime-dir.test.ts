/**
 * The runtime directory of the-loop's sockets is out of the engine's reach in its sandbox (real
 * bwrap): a keys socket there would let an engine press keys in any PTY turn of the data dir. With
 * TMPDIR outside /tmp (the sandbox's /tmp is private, so /tmp alone would prove nothing), the keys
 * sockets are not seen, even when the directory did not exist yet when the sandbox was planned; the
 * gateway's gh socket, bound on purpose, is.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { configSchema } from '../../src/config/schema.js';
import { gatewaySocketPath } from '../../src/gateway/listen.js';
import { sandboxPlan } from '../../src/guard/sandbox-view.js';
import {
  currentUid,
  ensurePrivateDirs,
  ensureRuntimeDir,
  runtimeDirOf,
  runtimeRoot,
} from '../../src/os/runtime-dir.js';
import { keysSocketPath, serveKeys } from '../../src/runners/process/keys-socket.js';
import { detectBwrap } from '../../src/sandbox/detect.js';

const bwrap = detectBwrap();
const SUITE = bwrap.available
  ? 'the runtime directory in the sandbox (real bwrap)'
  : `SKIPPED: ${bwrap.available ? '' : bwrap.reason}`;
const REPO_ROOT = realpathSync(join(import.meta.dirname, '../..'));

let root: string;
let tmp: string;
beforeEach(() => {
  root = realpathSync(mkdtempSync(join(tmpdir(), 'the-loop-rtplan-')));
  // Outside /tmp: a TMPDIR such as /var/tmp is visible in the sandbox unless hidden.
  tmp = realpathSync(mkdtempSync('/var/tmp/the-loop-rt-'));
});
afterEach(() => {
  rmSync(root, { recursive: true, force: true });
  rmSync(tmp, { recursive: true, force: true });
});

function planFor(dataDir: string, socketPath: string | undefined) {
  const ws = join(root, 'ws');
  const state = join(dataDir, 'sessions', 's');
  mkdirSync(ws, { recursive: true });
  mkdirSync(state, { recursive: true });
  return sandboxPlan({
    workspace: ws,
    stateDir: state,
    hookFiles: [],
    dataDir,
    configPath: null,
    packageRoot: REPO_ROOT,
    binaryRoot: undefined,
    socketPath,
    engineWritable: [],
    engineEnv: { HOME: join(root, 'home') },
    operatorEnv: { HOME: join(root, 'home'), PATH: process.env.PATH, TMPDIR: tmp },
    config: configSchema.parse({}).sandbox,
  });
}

/** A fixed shell script inside the sandbox (test code only); its output. */
function inside(argv: string[], script: string): string {
  const res = spawnSync(bwrap.available ? bwrap.path : 'bwrap', [...argv, '/bin/sh', '-c', script], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' },
  });
  return `${res.stdout}${res.stderr}`;
}

describe.skipIf(!bwrap.available)(SUITE, () => {
  it('hides the keys sockets, made after the plan, and shows the gh socket bound on purpose', async () => {
    const env = { TMPDIR: tmp };
    const dataDir = join(root, 'data');
    // Planned before any socket exists (a first turn with the gateway off): the root is made now.
    const plan = planFor(dataDir, undefined);
    const rootDir = runtimeRoot(env, currentUid());
    expect(realpathSync(rootDir)).toBe(rootDir);

    const keysPath = keysSocketPath(runtimeDirOf(env, dataDir), 'github-octo-widgets-8-4fc3b496e3');
    const keys = await serveKeys(keysPath, async () => {}, {
      prepareDir: () => ensureRuntimeDir(env, dataDir),
    });
    const gh = createServer();
    try {
      const probe = `test -d ${tmp} && echo TMPDIR-SEEN; test -S ${keysPath} && echo KEYS-SEEN; ls -A ${rootDir}; true`;
      const out = inside(plan.argv({ terminal: true }), probe);
      // TMPDIR itself is in sight (the rest of / is read-only, not hidden); the sockets' root is empty.
      expect(out).toContain('TMPDIR-SEEN');
      expect(out).not.toContain('KEYS-SEEN');
      expect(out).not.toContain(dirname(keysPath).slice(rootDir.length + 1));

      // With the gateway on: its socket's own directory is bound, nothing beside it.
      const ghPath = gatewaySocketPath(configSchema.parse({}), dataDir, env);
      ensurePrivateDirs([dirname(ghPath)]);
      await new Promise<void>((resolve) => gh.listen(ghPath, resolve));
      const withGateway = planFor(dataDir, ghPath);
      const seen = inside(
        withGateway.argv({ terminal: false }),
        `test -S ${ghPath} && echo GH-SEEN; test -S ${keysPath} && echo KEYS-SEEN; ls -A ${dirname(dirname(ghPath))}; true`,
      );
      expect(seen).toContain('GH-SEEN');
      expect(seen).not.toContain('KEYS-SEEN');
      expect(seen.split('\n')).not.toContain(keysPath.slice(dirname(keysPath).length + 1));
    } finally {
      await new Promise<void>((resolve) => gh.close(() => resolve()));
      await keys.close();
    }
  });
});
