// The per-address limiter of a process without Redis: rate-limiter-flexible's
// fixed-window rule, 16 bytes a tracked address, and a bound on tracked addresses that answers
// 503 with Retry-After and recovers when windows close.
import { describe, expect, it } from 'vitest';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { CompactRateLimiter } from '../../../src/platform/limits/compact-rate-limiter.js';
import { consumeNowOrThrow, consumeOrThrow } from '../../../src/platform/limits/lockout.js';
import { AppError, rateLimited } from '../../../src/errors.js';

let t = 1_800_000_000_000;
const now = () => t;

describe('compact rate limiter', () => {
  it('allows `points` calls in a window that opens at the first call, then refuses with the time left', async () => {
    const l = new CompactRateLimiter({ points: 30, duration: 60, now });
    for (let i = 0; i < 30; i++) await l.consume('198.51.100.7');
    t += 20_000;
    const refused = await l.consume('198.51.100.7').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimiterRes);
    expect((refused as RateLimiterRes).consumedPoints).toBe(31);
    expect((refused as RateLimiterRes).msBeforeNext).toBeGreaterThan(39_000);
    expect((refused as RateLimiterRes).msBeforeNext).toBeLessThanOrEqual(40_100);
    const err = await consumeOrThrow(l, '198.51.100.7', rateLimited).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'rate_limited', status: 429, headers: { 'Retry-After': '41' } });
    // The same window answered without a promise (the client gate's synchronous lane).
    expect(() => consumeNowOrThrow(l, '198.51.100.7', rateLimited)).toThrow(
      expect.objectContaining({ code: 'rate_limited', headers: { 'Retry-After': '41' } }),
    );
    expect(() => l.consumeNow('198.51.100.7')).toThrow(expect.objectContaining({ consumedPoints: 34 }));
    expect(l.consumeNow('198.51.100.10').remainingPoints).toBe(29);
    // Other addresses have their own windows.
    await l.consume('198.51.100.8');
    t += 40_200;
    const again = await l.consume('198.51.100.7');
    expect(again.isFirstInDuration).toBe(true);
    expect(again.remainingPoints).toBe(29);
  });

  it('never announces a wait longer than the window, even refused in the tick the window opened', async () => {
    const l = new CompactRateLimiter({ points: 2, duration: 60, now });
    await l.consume('198.51.100.9');
    await l.consume('198.51.100.9');
    const refused = (await l.consume('198.51.100.9').catch((e: unknown) => e)) as RateLimiterRes;
    expect(refused.msBeforeNext).toBeLessThanOrEqual(60_000);
    const err = await consumeOrThrow(l, '198.51.100.9', rateLimited).catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 429, headers: { 'Retry-After': '60' } });
  });

  it('tracks 100,000 addresses in at most 32 bytes each, every one counted exactly', async () => {
    const l = new CompactRateLimiter({ points: 2, duration: 60, now });
    const ip = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
    for (let i = 0; i < 100_000; i++) await l.consume(ip(i));
    expect(l.size).toBe(100_000);
    expect(l.bytes / 100_000).toBeLessThanOrEqual(32);
    for (let i = 0; i < 100_000; i += 101) await l.consume(ip(i)); // the second call of each
    for (let i = 0; i < 100_000; i += 101) await expect(l.consume(ip(i))).rejects.toBeInstanceOf(RateLimiterRes);
    await expect(l.consume(ip(1))).resolves.toBeInstanceOf(RateLimiterRes);
    // When the windows close the table is rebuilt small again by the next new addresses.
    t += 61_000;
    for (let i = 0; i < 2_000; i++) await l.consume(`2001:db8::${i.toString(16)}`);
    expect(l.size).toBe(2_000);
    expect(l.bytes).toBeLessThan(200_000);
  });

  it('past maxKeys open windows a new address gets 503 with Retry-After; known ones are still counted; it recovers', async () => {
    const l = new CompactRateLimiter({ points: 5, duration: 60, now, maxKeys: 1_000 });
    for (let i = 0; i < 1_000; i++) await l.consume(`a${i}`);
    t += 30_000;
    const refused = await l.consume('b0').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AppError);
    await expect(l.consume('b1')).rejects.toBeInstanceOf(AppError);
    expect(refused).toMatchObject({ code: 'unavailable', status: 503 });
    const wait = Number((refused as AppError).headers!['Retry-After']);
    expect(wait).toBeGreaterThanOrEqual(1);
    expect(wait).toBeLessThanOrEqual(31);
    await expect(l.consume('a1')).resolves.toBeInstanceOf(RateLimiterRes);
    expect(l.bytes).toBeLessThanOrEqual(Math.ceil(1_001 / 0.4) * 12);
    t += 31_000;
    await expect(l.consume('c1')).resolves.toBeInstanceOf(RateLimiterRes);
  });
});
