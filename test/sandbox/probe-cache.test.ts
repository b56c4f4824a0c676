import {
  appendFileSync,
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { detectBwrapAsync } from '../../src/sandbox/detect.js';
import { probeIdentity, readProbe, writeProbe } from '../../src/sandbox/probe-cache.js';

const linux = process.platform === 'linux';

describe.runIf(linux)('bwrap probe cache', () => {
  let root: string;
  let cacheDir: string;
  let log: string;
  let n = 0;

  /** A stand-in bwrap: says its version, logs each run, and passes (or fails) the trial. */
  const fakeBwrap = (trial: 'works' | 'fails' = 'works') => {
    const path = join(root, `bwrap-${++n}`);
    writeFileSync(
      path,
      `#!/bin/sh\necho "$1" >> ${log}\nif [ "$1" = --version ]; then echo "bubblewrap 0.11.0"; exit 0; fi\n${trial === 'works' ? 'exit 0' : 'echo "bwrap: No permissions to create new namespace" >&2; exit 1'}\n`,
      { mode: 0o755 },
    );
    return path;
  };
  const runs = () => readFileSync(log, 'utf8').split('\n').filter(Boolean).length;
  // Each call its own PATH: this process's own answers (keyed by binary and PATH) are not reused.
  const detect = (path: string) =>
    detectBwrapAsync({ path, cacheDir, env: { PATH: `/usr/bin:/bin:${root}/p${++n}` } });

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'the-loop-probe-cache-'));
    cacheDir = join(root, 'state', 'probe-cache');
    log = join(root, 'runs.log');
    writeFileSync(log, '');
  });
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it('keeps a working probe: the next process runs neither bwrap --version nor the trial', async () => {
    const bwrap = fakeBwrap();
    expect(await detect(bwrap)).toEqual({ available: true, path: bwrap, version: '0.11.0' });
    expect(runs()).toBe(2);
    expect(await detect(bwrap)).toEqual({ available: true, path: bwrap, version: '0.11.0' });
    expect(runs()).toBe(2);
  });

  it('probes again when the binary changes', async () => {
    const bwrap = fakeBwrap();
    await detect(bwrap);
    appendFileSync(bwrap, '# rebuilt\n');
    await detect(bwrap);
    expect(runs()).toBe(4);
  });

  it('never keeps a failure: the probe fails closed, each time', async () => {
    const bwrap = fakeBwrap('fails');
    for (let i = 0; i < 2; i++) {
      const found = await detect(bwrap);
      expect(found.available).toBe(false);
      expect(found).toMatchObject({ reason: expect.stringMatching(/cannot create a sandbox here/) });
    }
    expect(runs()).toBe(4);
  });

  it('a kept entry says only that this binary works, never where bwrap is', async () => {
    const bwrap = fakeBwrap();
    const other = fakeBwrap();
    const identity = probeIdentity(bwrap, '/bin/true', ['--x']) as string;
    writeProbe(cacheDir, bwrap, identity, '0.11.0');
    // Another binary (another identity, another entry): not answered by the first one's entry.
    expect(readProbe(cacheDir, other, identity)).toBeUndefined();
    expect(readProbe(cacheDir, bwrap, identity)).toBe('0.11.0');
    expect(probeIdentity(bwrap, '/bin/true', ['--y'])).not.toBe(identity);
  });

  it('is not trusted when someone else could have written it', () => {
    const bwrap = fakeBwrap();
    const identity = probeIdentity(bwrap, '/bin/true', []) as string;
    writeProbe(cacheDir, bwrap, identity, '0.11.0');
    const [entry] = readdirSync(cacheDir);
    const file = join(cacheDir, entry as string);
    expect(readProbe(cacheDir, bwrap, identity)).toBe('0.11.0');
    chmodSync(file, 0o666);
    expect(readProbe(cacheDir, bwrap, identity)).toBeUndefined();
    chmodSync(file, 0o600);
    chmodSync(cacheDir, 0o777);
    expect(readProbe(cacheDir, bwrap, identity)).toBeUndefined();
    chmodSync(cacheDir, 0o700);
    // A link planted at the entry's name is not followed.
    const planted = join(root, 'planted.json');
    writeFileSync(planted, readFileSync(file), { mode: 0o600 });
    rmSync(file);
    symlinkSync(planted, file);
    expect(readProbe(cacheDir, bwrap, identity)).toBeUndefined();
    // Nor is an entry with a version that is not one.
    rmSync(file);
    mkdirSync(cacheDir, { recursive: true });
    writeFileSync(
      file,
      JSON.stringify({ format: 'the-loop-bwrap-probe-1', identity, version: '1.0; rm -rf' }),
      {
        mode: 0o600,
      },
    );
    expect(readProbe(cacheDir, bwrap, identity)).toBeUndefined();
  });
});
