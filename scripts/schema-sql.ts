import { initOrm } from '../src/platform/db/orm.js';
const orm = await initOrm({ url: process.argv[2]! });
const gen = orm.getSchemaGenerator();
console.log(await gen.getCreateSchemaSQL({ wrap: false }));
await orm.close();
