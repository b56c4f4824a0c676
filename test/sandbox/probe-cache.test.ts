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
import { detectBwrap, detectBwrapAsync } from '../../src/sandbox/detect.js';
import {
  machineFacts,
  type ProcFacts,
  probeCacheDir,
  probeIdentity,
  readProbe,
  readProcFacts,
  writeProbe,
} from '../../src/sandbox/probe-cache.js';

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

  it('deletes the entry when a probe fails; a fresh probe (doctor) heals a stale one', async () => {
    const bwrap = fakeBwrap('fails');
    // A stale entry: it says this very binary works on this very machine.
    const identity = probeIdentity(bwrap, '/bin/true', []) as string;
    writeProbe(cacheDir, bwrap, identity, '0.11.0');
    const [entry] = readdirSync(cacheDir);
    const stale = { path: bwrap, cacheDir, env: { PATH: `/usr/bin:/bin:${root}/p${++n}` } };
    expect(readProbe(cacheDir, bwrap, identity)).toBe('0.11.0');
    expect(detectBwrap({ ...stale, fresh: true }).available).toBe(false);
    expect(readdirSync(cacheDir)).not.toContain(entry);
    // A kept answer of a working one, then the binary breaks: the failed probe deletes it.
    const other = fakeBwrap();
    await detect(other);
    expect(readdirSync(cacheDir)).toHaveLength(1);
    writeFileSync(other, '#!/bin/sh\nexit 1\n');
    expect((await detect(other)).available).toBe(false);
    expect(readdirSync(cacheDir)).toHaveLength(0);
  });
});

describe('a probe’s identity: the machine’s facts', () => {
  const status =
    'Name:\tnode\nSeccomp:\t0\nNoNewPrivs:\t0\nCapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\n';
  const facts: ProcFacts = {
    bootId: 'b00t',
    namespaces: ['user:[1]', 'mnt:[2]', 'pid:[3]'],
    status,
    lsm: 'unconfined',
  };
  const key = (f: Partial<ProcFacts>) => JSON.stringify(machineFacts({ ...facts, ...f }, ['1', '', '']));

  it('changes with NoNewPrivs, CapBnd, CapEff, Seccomp and the LSM label', () => {
    const base = key({});
    expect(machineFacts(facts, [])).not.toBeNull();
    expect(key({ status: status.replace('NoNewPrivs:\t0', 'NoNewPrivs:\t1') })).not.toBe(base);
    expect(
      key({ status: status.replace('CapBnd:\t000001ffffffffff', 'CapBnd:\t0000000000000000') }),
    ).not.toBe(base);
    expect(
      key({ status: status.replace('CapEff:\t0000000000000000', 'CapEff:\t00000000a80425fb') }),
    ).not.toBe(base);
    expect(key({ status: status.replace('Seccomp:\t0', 'Seccomp:\t2') })).not.toBe(base);
    expect(key({ lsm: 'docker-default (enforce)' })).not.toBe(base);
    expect(key({ lsm: 'none' })).not.toBe(base);
  });

  it('is unknown (nothing cached) when a fact cannot be read, never read as empty', () => {
    expect(machineFacts({ ...facts, bootId: null }, [])).toBeNull();
    expect(machineFacts({ ...facts, bootId: '' }, [])).toBeNull();
    expect(machineFacts({ ...facts, namespaces: ['user:[1]', null, 'pid:[3]'] }, [])).toBeNull();
    expect(machineFacts({ ...facts, status: null }, [])).toBeNull();
    expect(machineFacts({ ...facts, status: status.replace(/^CapEff.*$/m, '') }, [])).toBeNull();
    expect(machineFacts({ ...facts, lsm: null }, [])).toBeNull();
    const bwrap = join(tmpdir(), 'the-loop-no-such-bwrap');
    expect(probeIdentity('/bin/sh', '/bin/true', [], { ...facts, bootId: null })).toBeNull();
    expect(probeIdentity(bwrap, '/bin/true', [], facts)).toBeNull();
    expect(probeIdentity('/bin/sh', '/bin/true', [], facts)).toMatch(/^[0-9a-f]{64}$/);
  });

  it.runIf(linux)('reads this process’s facts from /proc', () => {
    const here = readProcFacts();
    expect(here.bootId).toMatch(/\S/);
    expect(here.namespaces.every((ns) => ns !== null)).toBe(true);
    expect(machineFacts(here, [])).not.toBeNull();
  });

  it('is off with THE_LOOP_PROBE_CACHE=0', () => {
    expect(probeCacheDir('/s', {})).toBe('/s/the-loop/probe-cache');
    expect(probeCacheDir('/s', { THE_LOOP_PROBE_CACHE: '1' })).toBe('/s/the-loop/probe-cache');
    expect(probeCacheDir('/s', { THE_LOOP_PROBE_CACHE: '0' })).toBeUndefined();
  });
});
