import { describe, expect, it } from 'vitest';
import { progressText, ScanProgress } from '../../src/cli/scan-progress.js';

/** The progress line's rules, on a clock the test moves (what it prints, when). */
function rig(terminal: boolean, json = false) {
  let now = 1_000_000;
  const status: Array<string | null> = [];
  const err: string[] = [];
  const progress = new ScanProgress(
    { err: (t) => err.push(t), status: terminal ? (line) => status.push(line) : undefined },
    { json, now: () => now },
  );
  return {
    progress,
    status,
    err,
    at: (ms: number) => {
      now = 1_000_000 + ms;
    },
  };
}

describe('usage scan progress', () => {
  it('the line: MB read of the total, percent, seconds', () => {
    expect(progressText(412e6, 1_140.3e6, 4_100)).toBe('usage scan: 412.0 of 1,140.3 MB read (36%), 4.1 s');
    expect(progressText(0, 0, 3_000)).toBe('usage scan: 0.0 of 0.0 MB read (100%), 3.0 s');
  });

  it('a short scan shows nothing', () => {
    const r = rig(true);
    r.at(2_900);
    r.progress.update(10, 100);
    r.progress.end();
    expect(r.status).toEqual([]);
    expect(r.err).toEqual([]);
  });

  it('on a terminal: one line rewritten at most 4 times a second, erased at the end', () => {
    const r = rig(true);
    r.at(3_000);
    r.progress.update(10e6, 100e6);
    r.at(3_100);
    r.progress.update(20e6, 100e6);
    r.at(3_300);
    r.progress.update(30e6, 100e6);
    r.progress.end();
    expect(r.status).toEqual([
      'usage scan: 10.0 of 100.0 MB read (10%), 3.0 s',
      'usage scan: 30.0 of 100.0 MB read (30%), 3.3 s',
      null,
    ]);
    expect(r.err).toEqual([]);
  });

  it('elsewhere: a plain line every 10 s on stderr; none with --json', () => {
    const r = rig(false);
    for (const ms of [3_000, 5_000, 12_999, 13_000, 20_000]) {
      r.at(ms);
      r.progress.update(ms * 1000, 100e6);
    }
    r.progress.end();
    expect(r.err).toEqual([
      'usage scan: 3.0 of 100.0 MB read (3%), 3.0 s\n',
      'usage scan: 13.0 of 100.0 MB read (13%), 13.0 s\n',
    ]);
    const quiet = rig(false, true);
    quiet.at(30_000);
    quiet.progress.update(1, 2);
    expect(quiet.err).toEqual([]);
  });
});
