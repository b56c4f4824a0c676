/**
 * `console:` in the config: its defaults, a non-loopback bind refused without an https
 * publicOrigin (with a hint), publicOrigin's form, and the seed's `routing.webTerminal` alias.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { consolePort, isLoopbackHost } from '../../src/config/console-schema.js';
import { loadConfig } from '../../src/config/load.js';
import { makeProject } from '../helpers/cli.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

function load(config: Record<string, unknown>) {
  const project = makeProject(config);
  cleanups.push(project.cleanup);
  return loadConfig({ cwd: project.dir, env: {}, configPath: project.configPath });
}

describe('console config', () => {
  it('defaults: enabled on 127.0.0.1:7702 (the gateway has 7701), no public origin, bounded viewers', () => {
    const { config } = load({});
    expect(config.console).toEqual({
      enabled: true,
      host: '127.0.0.1',
      port: undefined,
      publicOrigin: undefined,
      allowedHosts: [],
      maxViewersPerSession: 16,
      maxViewers: 256,
      sessionHours: 12,
    });
    expect(consolePort(config.console, config.server)).toBe(7702);
    // A daemon on any free webhook port (serve --port 0) takes any free console port too.
    expect(consolePort(config.console, { port: 0 })).toBe(0);
    expect(consolePort({ port: 9000 }, { port: 0 })).toBe(9000);
  });

  it('refuses a non-loopback bind without an https publicOrigin, saying what to do', () => {
    for (const host of ['0.0.0.0', '192.168.1.10', '::']) {
      expect(() => load({ console: { host } })).toThrow(
        /console\.publicOrigin: .*not a loopback address.*https origin/s,
      );
    }
    // Disabled, the bind does not matter.
    expect(load({ console: { host: '0.0.0.0', enabled: false } }).config.console.enabled).toBe(false);
  });

  it('takes an https publicOrigin (normalised), and refuses http, paths, credentials', () => {
    const c = load({ console: { host: '0.0.0.0', publicOrigin: 'https://Loop.Example.org:443' } }).config
      .console;
    expect(c.publicOrigin).toBe('https://loop.example.org');
    for (const publicOrigin of [
      'http://loop.example.org',
      'https://loop.example.org/console',
      'https://user:pw@loop.example.org',
      'https://loop.example.org?x=1',
      'loop.example.org',
    ]) {
      expect(() => load({ console: { host: '0.0.0.0', publicOrigin } }), publicOrigin).toThrow(
        /console\.publicOrigin: must be an https origin/,
      );
    }
  });

  it('checks allowedHosts as Host header values', () => {
    expect(
      load({ console: { allowedHosts: ['loop.internal:8443', '[::1]:9'] } }).config.console.allowedHosts,
    ).toEqual(['loop.internal:8443', '[::1]:9']);
    expect(() => load({ console: { allowedHosts: ['http://x'] } })).toThrow(/allowedHosts/);
  });

  it('accepts the seed’s routing.webTerminal as the console; both given is an error', () => {
    const c = load({ routing: { webTerminal: { enabled: false, host: '127.0.0.1', port: 9000 } } }).config;
    expect(c.console).toMatchObject({ enabled: false, host: '127.0.0.1', port: 9000 });
    expect(() => load({ routing: { webTerminal: { port: 9000 } }, console: { port: 9001 } })).toThrow(
      /both routing\.webTerminal and console are set/,
    );
    expect(() => load({ routing: { webTerminal: { host: '0.0.0.0' } } })).toThrow(/console\.publicOrigin/);
  });

  it('knows loopback addresses', () => {
    for (const h of ['127.0.0.1', '127.1.2.3', 'localhost', '::1', '[::1]'])
      expect(isLoopbackHost(h), h).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.1', 'localhost.evil', '127.0.0.1.nip.io'])
      expect(isLoopbackHost(h), h).toBe(false);
  });
});
