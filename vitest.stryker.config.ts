import { defineConfig } from 'vitest/config';

// The suites the mutation run (npm run mutate, stryker.config.json) executes per mutant: fast,
// in-process tests of actors/, cluster/ and the pure service modules. The contract suites need
// Redis (127.0.0.1:6379, or TEST_REDIS_URL). Left out: test/integration/cluster-routing.test.ts and
// cluster-transport.test.ts. Their cluster nodes start in beforeAll and tick in the background, so
// most cluster/ mutants count as covered by every one of their tests, 2 to 6 s each (a worker in a
// child process killed mid-call, two servers on PostgreSQL): hours per run on 2 cores. What they pin
// is pinned here by test/contract/cluster-node.test.ts and peer-transport.test.ts (README "Mutation testing").
export default defineConfig({
  test: {
    include: [
      'test/unit/heartbeat.machine.test.ts',
      'test/unit/license.machine.test.ts',
      'test/unit/license-policy.test.ts',
      'test/unit/license-keys.test.ts',
      'test/unit/session-token.test.ts',
      'test/unit/compact-rate-limiter.test.ts',
      'test/unit/client-sessions.test.ts',
      'test/unit/geo.test.ts',
      'test/unit/cluster-parts.test.ts',
      'test/unit/service-rules.test.ts',
      'test/contract/**/*.test.ts',
    ],
    testTimeout: 30_000,
    pool: 'forks',
  },
});
