import { defineConfig } from 'vitest/config';

// Two groups (docs/testing.md): the in-process suites first, two files at a time in workers that keep
// their loaded modules between files (isolate: false; each file still builds its own servers and
// databases); then the end-to-end suites, which start real server processes (a cluster of three among
// them) and toolchains, also two files at a time: they mostly wait on servers, timers and compilers,
// and none of them asserts a speed.
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
            'test/tools/**/*.test.ts',
            'test/hostile/**/*.test.ts',
            'sdk/**/*.test.ts',
            'web/**/*.test.ts',
          ],
          maxWorkers: 2,
          isolate: false,
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
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
