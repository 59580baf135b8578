import { defineConfig } from 'vitest/config';

// `npm run test:scale`: the dashboard at 50,000 keys in Chromium (test/scale/). Not part of
// `npm test` (vitest.config.ts does not include test/scale/); .ci/run runs it after the suite.
// It reports its timings (test output, test-output/dashboard-scale.md) and asserts behaviour only.
export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    include: ['test/scale/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 300_000,
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
  },
});
