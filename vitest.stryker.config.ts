import { defineConfig } from 'vitest/config';

// The suites the mutation run (npm run mutate, stryker.config.json) executes per mutant: fast,
// in-process tests of the actors, platform/cluster and the pure rules of the modules. The contract suites need
// Redis (127.0.0.1:6379, or TEST_REDIS_URL). Left out: test/platform/cluster/cluster-routing.test.ts and
// cluster-transport.test.ts. Their cluster nodes start in beforeAll and tick in the background, so
// most cluster/ mutants count as covered by every one of their tests, 2 to 6 s each (a worker in a
// child process killed mid-call, two servers on PostgreSQL): hours per run on 2 cores. What they pin
// is pinned here by test/platform/cluster/cluster-node.test.ts and peer-transport.test.ts (docs/testing.md "Mutation testing").
export default defineConfig({
  test: {
    include: [
      'test/modules/heartbeat/heartbeat.machine.test.ts',
      'test/modules/activation/license.machine.test.ts',
      'test/modules/activation/license-policy.test.ts',
      'test/modules/keys/license-keys.test.ts',
      'test/modules/client/session-token.test.ts',
      'test/platform/limits/compact-rate-limiter.test.ts',
      'test/modules/client/client-sessions.test.ts',
      'test/modules/geo/geo.test.ts',
      'test/platform/cluster/cluster-parts.test.ts',
      'test/modules/access/rules.test.ts',
      'test/platform/http/ip-address.test.ts',
      'test/modules/notify/webhook-url.test.ts',
      'test/platform/cluster/coordinator.contract.test.ts',
      'test/platform/cluster/redis-coordinator.test.ts',
      'test/platform/cluster/cluster-node.test.ts',
      'test/platform/cluster/peer-transport.test.ts',
    ],
    testTimeout: 30_000,
    pool: 'forks',
  },
});
