/**
 * An engine's config dir of its own per session (in the sandbox): made once, seeded with the
 * preset's settings files only — never through a symlink, never a credential — and named in the
 * engine's environment in place of the operator's.
 */
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mergeEngine } from '../../src/config/load.js';
import { BUILTIN_PRESETS } from '../../src/engines/presets.js';
import { sessionHome } from '../../src/guard/engine-home.js';
import { thrown } from '../helpers/check.js';

let root: string;
beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'the-loop-home-'));
});
afterEach(() => rmSync(root, { recursive: true, force: true }));

const claude = mergeEngine('claude', BUILTIN_PRESETS.claude, undefined);

describe('a session’s own engine config dir', () => {
  it('replaces the operator’s, seeded with its settings and nothing else', () => {
    const operator = join(root, 'op', '.claude');
    mkdirSync(operator, { recursive: true });
    writeFileSync(join(operator, 'settings.json'), '{"model":"sonnet"}\n');
    writeFileSync(join(operator, '.credentials.json'), '{"oauth":"SECRET"}\n');
    const home = sessionHome({
      preset: claude,
      engine: 'claude',
      slug: 'github-acme-demo-1',
      dataDir: join(root, 'data'),
      env: { HOME: join(root, 'op'), PATH: '/usr/bin' },
    });
    expect(home?.dir).toBe(join(root, 'data', 'homes', 'github-acme-demo-1', 'claude'));
    expect(home?.env.CLAUDE_CONFIG_DIR).toBe(home?.dir);
    expect(readFileSync(join(home?.dir ?? '', 'settings.json'), 'utf8')).toBe('{"model":"sonnet"}\n');
    expect(existsSync(join(home?.dir ?? '', '.credentials.json'))).toBe(false);
  });

  it('is made once: what the engine wrote there stays, later operator changes are not copied again', () => {
    const source = join(root, 'configured');
    mkdirSync(source);
    writeFileSync(join(source, 'settings.json'), '{"v":1}\n');
    const input = {
      preset: claude,
      engine: 'claude',
      slug: 'github-acme-demo-2',
      dataDir: join(root, 'data'),
      env: { CLAUDE_CONFIG_DIR: source },
    };
    const first = sessionHome(input);
    writeFileSync(join(first?.dir ?? '', 'settings.json'), '{"v":"engine"}\n');
    writeFileSync(join(source, 'settings.json'), '{"v":2}\n');
    const again = sessionHome(input);
    expect(readFileSync(join(again?.dir ?? '', 'settings.json'), 'utf8')).toBe('{"v":"engine"}\n');
  });

  it('never copies through a symlink (a settings file pointing at a secret)', () => {
    const source = join(root, 'configured');
    mkdirSync(source);
    writeFileSync(join(root, 'secret.txt'), 'SECRET\n');
    symlinkSync(join(root, 'secret.txt'), join(source, 'settings.json'));
    const home = sessionHome({
      preset: claude,
      engine: 'claude',
      slug: 'github-acme-demo-3',
      dataDir: join(root, 'data'),
      env: { CLAUDE_CONFIG_DIR: source },
    });
    expect(existsSync(join(home?.dir ?? '', 'settings.json'))).toBe(false);
  });

  it('refuses a name that is not a plain slug, and does nothing for a preset without one', () => {
    expect(
      thrown(() => sessionHome({ preset: claude, engine: 'claude', slug: '../x', dataDir: root, env: {} }))
        .message,
    ).toMatch(/unsafe session home/);
    const grok = mergeEngine('grok', BUILTIN_PRESETS.grok, undefined);
    expect(sessionHome({ preset: grok, engine: 'grok', slug: 's', dataDir: root, env: {} })).toBeUndefined();
  });
});
