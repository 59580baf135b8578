import { defineConfig } from 'vitest/config';

// Two groups: the in-process suites run in parallel first; then the end-to-end suites, which
// start real server processes (a cluster of three among them), run one file at a time so they
// never compete with each other for the two cores.
export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    projects: [
      {
        extends: true,
        test: {
          name: 'suite',
          include: [
            'test/modules/**/*.test.ts',
            'test/platform/**/*.test.ts',
            'test/unit/**/*.test.ts',
            'test/integration/**/*.test.ts',
            'test/contract/**/*.test.ts',
            'sdk/**/*.test.ts',
            'web/**/*.test.ts',
          ],
          maxWorkers: 2,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: [
            'test/e2e/**/*.test.ts',
            'test/sdk/**/*.test.ts',
            'test/web/**/*.test.ts',
            'test/deploy/**/*.test.ts',
          ],
          fileParallelism: false,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
