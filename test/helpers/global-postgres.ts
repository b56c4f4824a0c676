/**
 * Vitest global setup: one private PostgreSQL cluster for the whole run (test/helpers/postgres.ts),
 * with a template database migrated to the latest schema; its URL (no database) goes to every test
 * process in THE_LOOP_TEST_PG_URL. When it cannot start (PostgreSQL not installed), the run goes on
 * and THE_LOOP_TEST_PG_ERROR says why: each PostgreSQL test then fails with that reason, the others
 * run.
 */
import pg from 'pg';
import { openPg } from '../../src/store/postgres/migrate.js';
import { type Cluster, startCluster, TEMPLATE_DB } from './postgres.js';

export default async function setup(): Promise<() => void> {
  let cluster: Cluster | undefined;
  try {
    cluster = await startCluster();
    const admin = new pg.Client({ connectionString: cluster.url('postgres') });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${TEMPLATE_DB}`);
    await admin.end();
    const db = await openPg(cluster.url(TEMPLATE_DB), { max: 1 });
    await db.close();
    process.env.THE_LOOP_TEST_PG_URL = cluster.url('');
    process.env.THE_LOOP_TEST_PG_TRUST_URL = cluster.trustUrl('');
  } catch (error) {
    cluster?.stop();
    cluster = undefined;
    process.env.THE_LOOP_TEST_PG_ERROR = error instanceof Error ? error.message : String(error);
  }
  return () => {
    cluster?.stop();
    delete process.env.THE_LOOP_TEST_PG_URL;
    delete process.env.THE_LOOP_TEST_PG_TRUST_URL;
  };
}
