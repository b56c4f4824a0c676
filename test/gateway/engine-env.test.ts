/**
 * An engine the gateway serves: its environment holds no real credential (only the capability
 * token), git and gh are pointed at the gateway (checked with the real git), and the permission
 * mode follows what guards the engine.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mergeEngine } from '../../src/config/load.js';
import { buildEngineEnv } from '../../src/engines/env.js';
import { BUILTIN_PRESETS } from '../../src/engines/presets.js';
import { modelCredential, usesCloudCredential } from '../../src/gateway/credentials.js';
import { engineSetup, permissionModeOf } from '../../src/gateway/engine-env.js';
import { gitConfigText, writeSessionFiles } from '../../src/gateway/session-files.js';

const preset = (name: string) => mergeEngine(name, BUILTIN_PRESETS[name], undefined);
const TOKEN = `tlg1_${'t'.repeat(43)}`;
const REAL = 'sk-ant-real-canary-0123456789';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'the-loop-engine-env-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

function setup(
  name: string,
  daemonEnv: Record<string, string>,
  extra: Partial<Parameters<typeof engineSetup>[0]> = {},
) {
  const p = preset(name);
  return engineSetup({
    preset: p,
    env: buildEngineEnv(p, daemonEnv).env,
    gateway: { url: 'http://127.0.0.1:7701', socketPath: '/run/gw.sock' },
    token: TOKEN,
    modelCredential: modelCredential(p, daemonEnv, {}),
    githubToken: true,
    gitConfigFile: join(dir, 'gitconfig'),
    ghConfigDir: join(dir, 'gh'),
    githubHost: 'github.com',
    repository: 'acme/demo',
    sandbox: 'bwrap',
    permissions: 'bypass',
    ...extra,
  });
}

describe('the environment of an engine the gateway serves', () => {
  it('holds the capability token where the real key was, and no real credential at all', () => {
    const out = setup('claude', {
      PATH: '/usr/bin',
      HOME: '/home/op',
      ANTHROPIC_API_KEY: REAL,
      GH_TOKEN: 'ghp_operator_token_value',
      SSH_AUTH_SOCK: '/tmp/agent.sock',
    });
    expect(out.env.ANTHROPIC_API_KEY).toBe(TOKEN);
    expect(out.env.ANTHROPIC_BASE_URL).toBe(`http://127.0.0.1:7701/m/${TOKEN}`);
    expect(JSON.stringify(out.env)).not.toContain(REAL);
    expect(JSON.stringify(out.env)).not.toContain('ghp_operator_token_value');
    expect(out.env.SSH_AUTH_SOCK).toBeUndefined();
    expect(out.env.GH_TOKEN).toBe(TOKEN);
    expect(out.env.GH_REPO).toBe('acme/demo');
    expect(out.env.GIT_CONFIG_KEY_0).toBe('http.http://127.0.0.1:7701/git/.extraHeader');
    expect(out.env.GIT_CONFIG_VALUE_0).toBe(`Authorization: Bearer ${TOKEN}`);
    expect(out.env.TMPDIR).toBe('/tmp');
    expect(out.env.IS_SANDBOX).toBe('1');
    expect(out.args).toEqual(['--dangerously-skip-permissions']);
    // argv never carries the token.
    expect(JSON.stringify([out.args, out.interactiveArgs])).not.toContain(TOKEN);
    expect(out.guard).toEqual({
      sandbox: 'bwrap',
      gateway: { model: true, github: true },
      permissions: 'bypass',
      credentials: [
        { name: 'anthropic', kind: 'api-key', env: 'ANTHROPIC_API_KEY', held: 'gateway' },
        { name: 'github', kind: 'token', held: 'gateway' },
      ],
    });
  });

  it('points Codex at the gateway by a provider on its command line, its key in the environment', () => {
    const out = setup('codex', { PATH: '/usr/bin', CODEX_API_KEY: REAL });
    expect(out.env.OPENAI_API_KEY).toBe(TOKEN);
    expect(out.env.CODEX_API_KEY).toBeUndefined();
    expect(out.args.join(' ')).toContain('base_url = "http://127.0.0.1:7701/m/_"');
    expect(out.args).toContain('--dangerously-bypass-approvals-and-sandbox');
    expect(JSON.stringify(out.args)).not.toContain(TOKEN);
  });

  it('leaves a cloud credential to the engine (the gateway cannot sign for Bedrock)', () => {
    const p = preset('claude');
    const env = { AWS_BEARER_TOKEN_BEDROCK: 'bedrock-secret-value' };
    expect(usesCloudCredential(p, env, {})).toBe(true);
    expect(modelCredential(p, env, {})).toBeUndefined();
  });

  it('an engine on its own login (no credential for the gateway) talks to its API itself; git still goes through', () => {
    const out = setup('claude', { PATH: '/usr/bin' });
    expect(out.env.ANTHROPIC_API_KEY).toBeUndefined();
    expect(out.env.ANTHROPIC_BASE_URL).toBeUndefined();
    expect(out.guard.gateway).toEqual({ model: false, github: true });
    expect(out.guard.credentials.map((c) => c.name)).toEqual(['github']);
  });

  it('an engine whose API the gateway does not serve keeps its key, and the guard says so', () => {
    const out = setup('grok', { PATH: '/usr/bin', XAI_API_KEY: 'xai-real-key-000000' });
    expect(out.env.XAI_API_KEY).toBe('xai-real-key-000000');
    expect(out.guard.credentials).toContainEqual({
      name: 'XAI_API_KEY',
      kind: 'api-key',
      env: 'XAI_API_KEY',
      held: 'engine',
    });
  });

  it('a credential written in the config wins over the environment, in the variable of its kind', () => {
    const p = preset('claude');
    const held = modelCredential(
      p,
      { ANTHROPIC_API_KEY: 'from-env-0000000' },
      {
        anthropic: { value: 'oauth-token-000000000', kind: 'subscription' },
      },
    );
    expect(held).toEqual({
      value: 'oauth-token-000000000',
      kind: 'subscription',
      source: 'credentials.anthropic',
      tokenEnv: 'CLAUDE_CODE_OAUTH_TOKEN',
    });
  });

  it('without the gateway, the credential stays in the environment and says so', () => {
    const out = setup(
      'claude',
      { ANTHROPIC_API_KEY: REAL },
      { gateway: undefined, token: undefined, sandbox: 'none', permissions: 'default' },
    );
    expect(out.env.ANTHROPIC_API_KEY).toBe(REAL);
    expect(out.args).toEqual([]);
    expect(out.guard.credentials).toEqual([
      { name: 'ANTHROPIC_API_KEY', kind: 'api-key', env: 'ANTHROPIC_API_KEY', held: 'engine' },
    ]);
  });
});

describe('the permission mode', () => {
  it('bypasses only inside the sandbox with the gateway in front, unless the preset says otherwise', () => {
    const p = preset('claude');
    expect(permissionModeOf(p, 'bwrap', true)).toBe('bypass');
    expect(permissionModeOf(p, 'none', true)).toBe('default');
    expect(permissionModeOf(p, 'bwrap', false)).toBe('default');
    expect(permissionModeOf({ ...p, permissions: { ...p.permissions, mode: 'bypass' } }, 'none', false)).toBe(
      'bypass',
    );
  });
});

describe("the session's git config", () => {
  it('escapes values for git, and resets the credential helpers', () => {
    const text = gitConfigText({
      gatewayUrl: 'http://127.0.0.1:7701',
      githubHost: 'github.com',
      identity: { name: 'A "quoted" \\ name\nwith a newline', email: 'a@b.c' },
    });
    expect(text).toContain('\thelper = ""');
    expect(text).toContain('name = "A \\"quoted\\" \\\\ name\\nwith a newline"');
  });

  it('sends every GitHub URL form to the gateway with the token in a header, never in the URL', async () => {
    const seen: Array<{ url: string; auth: string | undefined }> = [];
    const server = createServer((req, res) => {
      seen.push({ url: req.url ?? '', auth: req.headers.authorization });
      res.writeHead(404);
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const files = writeSessionFiles(join(dir, 'state'), {
        gatewayUrl: url,
        githubHost: 'github.com',
        identity: {},
        socketPath: '/run/gw.sock',
      });
      expect(readFileSync(join(files.ghConfigDir, 'config.yml'), 'utf8')).toContain(
        'http_unix_socket: "/run/gw.sock"',
      );
      const env = {
        PATH: process.env.PATH ?? '/usr/bin',
        HOME: dir,
        GIT_CONFIG_GLOBAL: files.gitConfigFile,
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: `http.${url}/git/.extraHeader`,
        GIT_CONFIG_VALUE_0: `Authorization: Bearer ${TOKEN}`,
        GIT_TERMINAL_PROMPT: '0',
      };
      for (const remote of [
        'https://github.com/acme/demo.git',
        'git@github.com:acme/demo.git',
        'ssh://git@github.com/acme/demo.git',
      ]) {
        const stderr = await new Promise<string>((resolve) =>
          execFile('git', ['ls-remote', remote], { env, timeout: 20_000 }, (_e, _o, err) =>
            resolve(String(err)),
          ),
        );
        expect(stderr).not.toContain(TOKEN);
      }
      expect(seen.map((s) => s.url)).toEqual([
        '/git/acme/demo.git/info/refs?service=git-upload-pack',
        '/git/acme/demo.git/info/refs?service=git-upload-pack',
        '/git/acme/demo.git/info/refs?service=git-upload-pack',
      ]);
      for (const s of seen) expect(s.auth).toBe(`Bearer ${TOKEN}`);
    } finally {
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
