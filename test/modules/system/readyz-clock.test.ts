// /readyz reports a host clock more than a second off the coordinator's (still ready: a warning).
// Here the coordinator is in-process and runs on the server's clock, moved 5 s ahead of the real
// time the cluster node reads: the same offset a skewed host has from Redis's clock.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { TestClock } from '../../helpers/clock.js';

let skewed: TestServer;
let plain: TestServer;

beforeAll(async () => {
  const clock = new TestClock();
  clock.advance(5_000);
  skewed = await startTestServer({}, { clock });
  plain = await startTestServer();
});
afterAll(async () => {
  await skewed?.close();
  await plain?.close();
});

describe('/readyz and the clock', () => {
  it('warns about a clock more than a second off, and stays ready', async () => {
    const r = await fetch(`${skewed.base}/readyz`);
    expect(r.status).toBe(200);
    const body = (await r.json()) as { status: string; warnings: string[]; clock_skew_ms: number };
    expect(body.status).toBe('ready');
    expect(body.warnings).toHaveLength(1);
    expect(body.warnings[0]).toMatch(/^clock_skew: /);
    expect(Math.abs(body.clock_skew_ms + 5_000)).toBeLessThan(1_000);
  });

  it('says nothing of a clock in step', async () => {
    const body = (await (await fetch(`${plain.base}/readyz`)).json()) as Record<string, unknown>;
    expect(body).toEqual({ status: 'ready', coordination: 'local' });
  });
});
