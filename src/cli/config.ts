import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { ignoreInWorkTree } from '../config/data-dir.js';
import { generateSecret, starterConfig } from '../config/init.js';
import { DEFAULT_CONFIG_PATH, loadConfig } from '../config/load.js';
import { configJsonSchema } from '../config/schema.js';
import { LoopError } from '../core/errors.js';
import { capabilitiesOf } from '../engines/capabilities.js';
import { table } from './format.js';
import { EXIT, type Io } from './io.js';

/**
 * Write the starter config (with a fresh webhook secret) and its JSON Schema beside it. In a git
 * work tree the directory gets a `.gitignore` of `*` first: the config holds the webhook secret.
 */
export function writeStarterConfig(path: string): { schemaPath: string; gitignore: string | null } {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const gitignore = ignoreInWorkTree(dirname(path));
  writeFileSync(path, starterConfig(generateSecret()), { mode: 0o600 });
  const schemaPath = join(dirname(path), 'config.schema.json');
  writeFileSync(schemaPath, `${JSON.stringify(configJsonSchema(), null, 2)}\n`);
  return { schemaPath, gitignore };
}

export function configInit(
  io: Io,
  options: { config?: string; dataDir?: string; force?: boolean; json?: boolean },
): number {
  const path = resolve(io.cwd, options.config ?? io.env.THE_LOOP_CONFIG ?? DEFAULT_CONFIG_PATH);
  if (existsSync(path) && !options.force) {
    throw new LoopError('config-exists', `${path} already exists`, { hint: 'Pass --force to overwrite it.' });
  }
  const { schemaPath, gitignore } = writeStarterConfig(path);
  // Where state will live: said now, so nobody looks for it beside the config.
  const { dataDir, warnings } = loadConfig({
    cwd: io.cwd,
    env: io.env,
    configPath: path,
    dataDir: options.dataDir,
  });
  if (options.json) io.out(`${JSON.stringify({ config: path, schema: schemaPath, gitignore, dataDir })}\n`);
  else
    io.out(
      `Wrote ${path}\nWrote ${schemaPath} (JSON Schema for editors)\n${gitignore ? `Wrote ${gitignore} (the config holds the webhook secret: git ignores this directory)\n` : ''}State (registry, log, keys) will live in ${dataDir}\nNext: \`the-loop config check\`, then \`the-loop doctor\`.\n`,
    );
  for (const warning of warnings) io.err(`the-loop: warning: ${warning}\n`);
  return EXIT.ok;
}

export function configCheck(io: Io, options: { config?: string; dataDir?: string; json?: boolean }): number {
  const loaded = loadConfig({
    cwd: io.cwd,
    env: io.env,
    configPath: options.config,
    dataDir: options.dataDir,
  });
  for (const warning of loaded.warnings) io.err(`the-loop: warning: ${warning}\n`);
  const engines = Object.entries(loaded.engines).map(([name, preset]) => ({
    name,
    binary: preset.binary,
    protocol: preset.protocol,
    capabilities: capabilitiesOf(preset),
  }));
  if (options.json) {
    io.out(
      `${JSON.stringify({ valid: true, path: loaded.path, dataDir: loaded.dataDir, defaults: loaded.config.defaults, engines }, null, 2)}\n`,
    );
    return EXIT.ok;
  }
  io.out(`${loaded.path ? `✓ ${loaded.path} is valid` : '✓ no config file; using defaults'}\n`);
  io.out(
    `  data dir  ${loaded.dataDir}\n  default   ${loaded.config.defaults.engine} on ${loaded.config.defaults.runner}\n\n`,
  );
  io.out(
    table(
      ['ENGINE', 'BINARY', 'PROTOCOL', 'RESUME', 'SESSION ID', 'TMUX', 'METER'],
      engines.map((e) => [
        e.name,
        e.binary,
        e.protocol,
        e.capabilities.resume ? 'yes' : 'no',
        e.capabilities.preassignedId ? 'pre-assigned' : e.capabilities.capturedId ? 'captured' : 'none',
        e.capabilities.tmux ? 'yes' : 'no',
        e.capabilities.meter === 'none' ? 'unmetered' : e.capabilities.meter,
      ]),
    ),
  );
  return EXIT.ok;
}

export function configSchemaCommand(io: Io): number {
  io.out(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
  return EXIT.ok;
}
