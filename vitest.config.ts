import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Test files share one PostgreSQL server but each gets its own database.
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
