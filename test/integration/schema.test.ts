import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initOrm, migrate, type Orm } from '../../src/db/orm.js';
import { createTestDatabase } from '../helpers/server.js';

let orm: Orm;
let drop: () => Promise<void>;

beforeAll(async () => {
  const db = await createTestDatabase();
  drop = db.drop;
  orm = await initOrm({ url: db.url });
});
afterAll(async () => {
  await orm.close(true);
  await drop();
});

describe('migrations', () => {
  it('apply from scratch, are idempotent, and describe exactly the entities', async () => {
    expect(await migrate(orm)).toEqual(['Migration20261121000000Initial']);
    expect(await migrate(orm)).toEqual([]);
    const diff = await orm.getSchemaGenerator().getUpdateSchemaSQL({ wrap: false });
    expect(diff.trim()).toBe('');
  });
});
