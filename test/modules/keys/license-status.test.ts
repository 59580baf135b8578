// One license-status rule: the TypeScript function the views use and the SQL predicates the
// listings filter and count with agree on every generated key (status, used_by, expiry, lifetime,
// an expiry a millisecond either side of now), evaluated by the real PostgreSQL.
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../../helpers/server.js';
import {
  STATUS_SQL,
  computedStatus,
  hasExpired,
  type ComputedStatus,
} from '../../../src/modules/keys/license-status.js';

let client: pg.Client;
let drop: () => Promise<void>;
beforeAll(async () => {
  const db = await createTestDatabase();
  drop = db.drop;
  client = new pg.Client({ connectionString: db.url });
  await client.connect();
});
afterAll(async () => {
  await client?.end();
  await drop?.();
});

const NOW = Date.parse('2026-11-25T12:00:00.000Z');
const key = fc.record({
  status: fc.constantFrom('unused', 'pending', 'used', 'banned'),
  used_by: fc.constantFrom('', 'license-only', 'alice'),
  expires_at: fc.option(fc.constantFrom(-86_400_000, -1, 0, 1, 86_400_000).map((d) => new Date(NOW + d).toISOString())),
  duration_days: fc.constantFrom(0, 1, 30),
});

describe('license status: SQL and TypeScript agree', () => {
  it('on 500 generated keys, each in exactly the computed filter the function names', async () => {
    const keys = fc.sample(key, { seed: 20261125, numRuns: 500 });
    const computed: ComputedStatus[] = ['active', 'banned', 'unactivated', 'expired'];
    const sql = `select ${computed.map((c) => `${STATUS_SQL[c].replaceAll('?', '$5')} as ${c}`).join(', ')}
      from unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[]) as license_keys(status, used_by, expires_at, duration_days)`;
    const { rows } = await client.query<Record<ComputedStatus, boolean>>(sql, [
      keys.map((k) => k.status),
      keys.map((k) => k.used_by),
      keys.map((k) => k.expires_at),
      keys.map((k) => k.duration_days),
      new Date(NOW).toISOString(),
    ]);
    expect(rows).toHaveLength(keys.length);
    rows.forEach((row, i) => {
      const inSql = computed.filter((c) => row[c]);
      expect(inSql, JSON.stringify(keys[i])).toEqual([computedStatus(keys[i]!, NOW)]);
    });
    // Every status occurs in the sample, so no branch of either side goes unchecked.
    expect(new Set(keys.map((k) => computedStatus(k, NOW)))).toEqual(new Set(computed));
  });

  it('at the boundary instant: not expired at expires_at itself, expired one millisecond after (docs/spec.md: "in the past")', async () => {
    const expiresAt = new Date(NOW).toISOString();
    const instants = [NOW - 1, NOW, NOW + 1];
    const { rows } = await client.query<{ active: boolean; expired: boolean }>(
      `select ${STATUS_SQL.active.replaceAll('?', 'n')} as active, ${STATUS_SQL.expired.replaceAll('?', 'n')} as expired
       from unnest($1::timestamptz[]) as t(n),
         (select 'used'::text as status, 'alice'::text as used_by, $2::timestamptz as expires_at, 30 as duration_days)
           as license_keys`,
      [instants.map((t) => new Date(t).toISOString()), expiresAt],
    );
    const js = instants.map((t) => hasExpired(expiresAt, false, t));
    expect(js).toEqual([false, false, true]);
    expect(rows.map((r) => r.expired)).toEqual(js);
    expect(rows.map((r) => r.active)).toEqual(js.map((e) => !e));
    // A lifetime key never expires, whatever its stored expiry.
    expect(instants.map((t) => hasExpired(expiresAt, true, t))).toEqual([false, false, false]);
  });
});
