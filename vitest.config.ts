import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Real engine CLIs and child processes: give them room, and keep parallelism at the core count.
    testTimeout: 120_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
    reporters: ['default'],
    // A private state home for the whole run (test/helpers/global-state-home.ts), and a private
    // PostgreSQL cluster (test/helpers/global-postgres.ts).
    globalSetup: ['test/helpers/global-state-home.ts', 'test/helpers/global-postgres.ts'],
  },
});
