import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.js';

/** A checkout-shaped temp dir with scripts/prepare.mjs, a source file and a fake npm that records. */
function checkout(): { dir: string; prepare: () => string[] | null } {
  const dir = mkdtempSync(join(tmpdir(), 'the-loop-prepare-'));
  mkdirSync(join(dir, 'scripts'));
  mkdirSync(join(dir, 'src'));
  copyFileSync(join(ROOT, 'scripts/prepare.mjs'), join(dir, 'scripts/prepare.mjs'));
  writeFileSync(join(dir, 'src/a.ts'), 'export {};\n');
  writeFileSync(join(dir, 'package.json'), '{}\n');
  const marker = join(dir, 'npm-called');
  writeFileSync(
    join(dir, 'fake-npm.cjs'),
    `require('node:fs').writeFileSync(${JSON.stringify(marker)}, JSON.stringify(process.argv.slice(2)));\n`,
  );
  const prepare = () => {
    rmSync(marker, { force: true });
    const r = spawnSync(process.execPath, [join(dir, 'scripts/prepare.mjs')], {
      env: { PATH: process.env.PATH, npm_execpath: join(dir, 'fake-npm.cjs') },
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    return existsSync(marker) ? (JSON.parse(readFileSync(marker, 'utf8')) as string[]) : null;
  };
  return { dir, prepare };
}

const made: string[] = [];
afterEach(() => {
  for (const dir of made.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('prepare (npm ci, and npx linking the checkout)', () => {
  it('builds when nothing is built, when an input is newer, and skips a current build', () => {
    const { dir, prepare } = checkout();
    made.push(dir);
    expect(prepare()).toEqual(['run', 'build', '--silent']);
    mkdirSync(join(dir, 'dist/cli-cache'), { recursive: true });
    writeFileSync(join(dir, 'dist/cli.cjs'), '');
    writeFileSync(join(dir, 'dist/cli-cache/other.bin'), '');
    // A build from before zod and the YAML parser were bundled apart is not current.
    expect(prepare()).toEqual(['run', 'build', '--silent']);
    writeFileSync(join(dir, 'dist/cli-zod.cjs'), '');
    writeFileSync(join(dir, 'dist/cli-yaml.cjs'), '');
    // Nor one from before the reading commands had a bundle of their own.
    expect(prepare()).toEqual(['run', 'build', '--silent']);
    writeFileSync(join(dir, 'dist/cli-read.cjs'), '');
    const past = new Date(Date.now() - 60_000);
    for (const p of ['src/a.ts', 'src', 'scripts/prepare.mjs', 'scripts', 'package.json', 'fake-npm.cjs'])
      utimesSync(join(dir, p), past, past);
    expect(prepare()).toBeNull();
    writeFileSync(join(dir, 'src/a.ts'), 'export const changed = 1;\n');
    expect(prepare()).toEqual(['run', 'build', '--silent']);
  });
});
