import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initOrm, migrate, type Orm } from '../../src/platform/db/orm.js';
import { MIGRATIONS } from '../../src/platform/db/migrations/index.js';
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
    expect([...a, ...b]).toEqual(MIGRATIONS.map((m) => m.name));
    expect(await migrate(orm, url)).toEqual([]);
    const diff = await orm.getSchemaGenerator().getUpdateSchemaSQL({ wrap: false });
    expect(diff.trim()).toBe('');
  });
});
