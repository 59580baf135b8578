// Which external services tests may use. Under REQUIRE_SERVICES=1 (CI) a missing Redis fails the
// run; elsewhere those tests skip with a clear message.
import { Redis } from 'ioredis';

export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export async function redisAvailable(): Promise<boolean> {
  const r = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    connectTimeout: 1000,
    retryStrategy: () => null,
  });
  r.on('error', () => undefined);
  try {
    await r.connect();
    await r.ping();
    return true;
  } catch {
    if (process.env.REQUIRE_SERVICES === '1')
      throw new Error(`REQUIRE_SERVICES=1 but Redis at ${REDIS_URL} is unreachable`);
    console.warn(
      `skipping Redis tests: no Redis at ${REDIS_URL} (set TEST_REDIS_URL, or REQUIRE_SERVICES=1 to fail instead)`,
    );
    return false;
  } finally {
    r.disconnect();
  }
}
