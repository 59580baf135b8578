import { defineConfig } from 'vitest/config';

// The suites the mutation run (npm run mutate, stryker.config.json) executes per mutant: fast,
// in-process tests of actors/, cluster/ and the pure service modules (no PostgreSQL server).
export default defineConfig({
  test: {
    include: [
      'test/unit/heartbeat.machine.test.ts', 'test/unit/license.machine.test.ts', 'test/unit/license-policy.test.ts',
      'test/unit/license-keys.test.ts', 'test/contract/coordinator.contract.test.ts', 'test/integration/cluster-routing.test.ts',
    ],
    testTimeout: 30_000,
    pool: 'forks',
  },
});
