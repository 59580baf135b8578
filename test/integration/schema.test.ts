import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initOrm, migrate, type Orm } from '../../src/db/orm.js';
import { createTestDatabase } from '../helpers/server.js';

let orm: Orm;
let drop: () => Promise<void>;
let url: string;

beforeAll(async () => {
  const db = await createTestDatabase();
  drop = db.drop;
  url = db.url;
  orm = await initOrm({ url: db.url });
});
afterAll(async () => {
  await orm.close(true);
  await drop();
});

describe('migrations', () => {
  it('apply from scratch, are idempotent, and describe exactly the entities', async () => {
    // Two at once take turns on the advisory lock: one applies, the other finds nothing to do.
    const [a, b] = await Promise.all([migrate(orm, url), migrate(orm, url)]);
    expect([...a, ...b]).toEqual(['Migration20261121000000Initial']);
    expect(await migrate(orm, url)).toEqual([]);
    const diff = await orm.getSchemaGenerator().getUpdateSchemaSQL({ wrap: false });
    expect(diff.trim()).toBe('');
  });
});
