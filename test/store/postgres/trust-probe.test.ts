/**
 * The daemon's probe for a PostgreSQL server that lets the store's user in without a password
 * (invariant 9, trust-probe.ts), against the run's cluster: its `loop` role needs a password, its
 * `loop_trust` role is trusted. The probe never signs in with the URL's password, PGPASSWORD or a
 * client certificate named in the URL.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { acceptsWithoutPassword } from '../../../src/store/postgres/trust-probe.js';
import { testCluster, testTrustCluster } from '../../helpers/postgres.js';

const saved = process.env.PGPASSWORD;
afterEach(() => {
  if (saved === undefined) delete process.env.PGPASSWORD;
  else process.env.PGPASSWORD = saved;
});

describe('acceptsWithoutPassword', () => {
  it('is false for a role that needs its password, even with the password in the URL and in PGPASSWORD', async () => {
    const url = `${testCluster()}postgres`;
    expect(new URL(url).password).not.toBe('');
    process.env.PGPASSWORD = decodeURIComponent(new URL(url).password);
    expect(await acceptsWithoutPassword(url)).toBeNull();
    expect(await acceptsWithoutPassword(`${url}?password=${new URL(url).password}`)).toBeNull();
  });

  it('is true for a role the server trusts, whatever password the URL carries', async () => {
    const trusted = new URL(`${testTrustCluster()}postgres`);
    expect(await acceptsWithoutPassword(trusted.toString())).toBe('loop_trust');
    trusted.password = 'not-needed-123';
    expect(await acceptsWithoutPassword(trusted.toString())).toBe('loop_trust');
  });

  it('reads the URL as pg does: ?host=, ?port= and ?user= name where and as whom', async () => {
    const trusted = new URL(testTrustCluster());
    const url = `postgres:///postgres?host=${trusted.hostname}&port=${trusted.port}&user=loop_trust`;
    expect(await acceptsWithoutPassword(url)).toBe('loop_trust');
  });

  it('is false when nothing answers', async () => {
    expect(await acceptsWithoutPassword('postgres://loop@127.0.0.1:1/x', 1000)).toBeNull();
  });
});
