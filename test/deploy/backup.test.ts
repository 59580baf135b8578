// `keywarden backup` and `keywarden restore` round trip with real processes: a server on its embedded
// PostgreSQL, a backup taken while it serves, a restore into a fresh DATA_DIR and a fresh server
// there. Keys generated before the backup activate afterwards and the answers verify under the first
// server's published key (the shared keys came along); a key made after the backup does not exist
// there; non-empty targets and damaged files are refused with a message. And the file is one
// snapshot: a row committed while the backup waits on a locked table is in none of its tables.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, KeywardenError, type KeywardenConfig } from '../../sdk/typescript/src/index.js';
import { clientConfig } from '../../src/modules/apps/sdk-archive.js';
import { spawnServer, type ServerProcess } from '../helpers/process.js';
import { OWNER as TEST_OWNER, createTestDatabase, startTestServer } from '../helpers/server.js';
import { writeBackup } from '../../src/platform/db/backup.js';
import { Api } from '../helpers/http.js';

const root = path.resolve(import.meta.dirname, '../..');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-backup-'));
const dirA = path.join(tmp, 'a');
const dirB = path.join(tmp, 'b');
const file = path.join(tmp, 'keywarden.backup');
const OWNER = { username: 'owner', password: 'backup-owner-pass-1' };

function cli(args: string[], env: Record<string, string>) {
  return spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), ...args], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', REDIS_URL: '', DATABASE_URL: '', ...env },
    encoding: 'utf8',
    timeout: 120_000,
  });
}

const servers: ServerProcess[] = [];
let config: KeywardenConfig;
let before: string[];
let after: string;
let appId: string;

async function activate(key: string, hwid: string) {
  const c = Client.fromConfig(config);
  await c.init();
  return c.activateLicense(key, hwid);
}

beforeAll(async () => {
  fs.mkdirSync(dirA);
  const a = await spawnServer({
    DATA_DIR: dirA,
    DATABASE_URL: '',
    OWNER_USERNAME: OWNER.username,
    OWNER_PASSWORD: OWNER.password,
  });
  servers.push(a);
  const owner = await new Api(a.base).signIn(OWNER.username, OWNER.password);
  const app = await owner.post('/api/apps', { name: 'Backup App' });
  expect(app.status).toBe(200);
  appId = app.body.id;
  expect((await owner.patch(`/api/apps/${appId}`, { hwid_lock: true })).status).toBe(200);
  const keys = await owner.post(`/api/apps/${appId}/licenses`, { amount: 3, duration: 30, unit: 'days', level: 4 });
  expect(keys.status).toBe(200);
  before = (keys.body as { key: string }[]).map((k) => k.key);
  const published = (
    (await (await fetch(`${a.base}/api/client/keys`)).json()) as {
      keys: { kid: string; public_key: string }[];
    }
  ).keys;
  config = clientConfig(
    {
      name: app.body.name,
      apiKey: app.body.api_key,
      apiSecret: app.body.api_secret,
      version: app.body.version,
      requireSignature: app.body.require_signature,
    },
    published,
    a.base,
  ) as KeywardenConfig;
  // One key bound to a device before the backup.
  expect((await activate(before[0]!, 'backup-hwid-a')).level).toBe(4);
}, 180_000);

afterAll(async () => {
  for (const s of servers) await s.stop('SIGTERM');
  fs.rmSync(tmp, { recursive: true, force: true });
}, 60_000);

describe('keywarden backup and restore', { timeout: 180_000 }, () => {
  it('backs up while the server runs; a key made afterwards is not in the snapshot', async () => {
    const a = servers[0]!;
    const r = cli(['backup', '--out', file], { DATA_DIR: dirA });
    expect(r.stderr).toContain('secret keys');
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^backup written to .*: \d+ rows in \d+ tables/);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    // the server kept serving: it did not lose its database to the backup
    expect((await fetch(`${a.base}/healthz`)).status).toBe(200);
    const owner = await new Api(a.base).signIn(OWNER.username, OWNER.password);
    const more = await owner.post(`/api/apps/${appId}/licenses`, { amount: 1, duration: 30, unit: 'days', level: 4 });
    after = (more.body as { key: string }[])[0]!.key;
    // the documented format: gzip JSON lines, a header with version, migrations and the keys
    const lines = zlib.gunzipSync(fs.readFileSync(file)).toString('utf8').trimEnd().split('\n');
    const header = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(header).toMatchObject({ format: 'keywarden-backup', version: 1 });
    expect((header.migrations as string[])[0]).toBe('Migration20261121000000Initial');
    expect(Object.keys(header.secrets as object).sort()).toEqual([
      'LICENSE_HASH_KEY',
      'RESPONSE_SIGNING_KEY',
      'RESPONSE_SIGNING_KID',
      'TWO_FACTOR_KEY',
    ]);
    expect((header.secrets as Record<string, string>).RESPONSE_SIGNING_KEY).toBe(
      fs.readFileSync(path.join(dirA, 'secrets', 'response-signing-k1.seed'), 'utf8').trim(),
    );
    expect(JSON.parse(lines.at(-1)!)).toHaveProperty('@end');
    await a.stop('SIGTERM');
  });

  it('restores into an empty DATA_DIR; the keys from before activate and verify on a fresh server', async () => {
    const r = cli(['restore', file], { DATA_DIR: dirB });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/restored the backup of .*: \d+ rows/);
    // no owner in the environment: the account came with the backup
    const b = await spawnServer({ DATA_DIR: dirB, DATABASE_URL: '', OWNER_USERNAME: '', OWNER_PASSWORD: '' });
    servers.push(b);
    expect(b.output.join('\n')).not.toContain('db.migrated');
    const published = (
      (await (await fetch(`${b.base}/api/client/keys`)).json()) as {
        keys: { public_key: string }[];
      }
    ).keys;
    expect(published.map((k) => k.public_key)).toEqual(config.response_keys.map((k) => k.public_key));
    config = { ...config, base_url: b.base };
    // an unused key from before: activates, and the SDK verified the answer under the old public key
    expect((await activate(before[1]!, 'backup-hwid-b')).level).toBe(4);
    // the device binding came along too
    expect((await activate(before[0]!, 'backup-hwid-a')).level).toBe(4);
    const refused = await activate(before[0]!, 'backup-hwid-other').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(KeywardenError);
    expect((refused as KeywardenError).code).toBe('hwid_mismatch');
    // the key made after the backup is not there
    const unknown = await activate(after, 'backup-hwid-c').catch((e: unknown) => e);
    expect((unknown as KeywardenError).code).toBe('invalid_key');
    const owner = await new Api(b.base).signIn(OWNER.username, OWNER.password);
    expect(((await owner.get('/api/apps')).body as { name: string }[]).map((x) => x.name)).toEqual(['Backup App']);
  });

  it('refuses a DATA_DIR that is not empty, a missing file and a damaged one, with a message', () => {
    const busy = cli(['restore', file], { DATA_DIR: dirB });
    expect(busy.status).toBe(1);
    expect(busy.stderr).toMatch(/^keywarden restore: refusing to restore into DATA_DIR .* which is not empty/);
    const fresh = path.join(tmp, 'c');
    const missing = cli(['restore', path.join(tmp, 'nope.backup')], { DATA_DIR: fresh });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toMatch(/nope\.backup does not exist/);
    const cut = path.join(tmp, 'cut.backup');
    const whole = zlib.gunzipSync(fs.readFileSync(file));
    fs.writeFileSync(cut, zlib.gzipSync(whole.subarray(0, whole.lastIndexOf('{"@end"'))));
    const short = cli(['restore', cut], { DATA_DIR: fresh });
    expect(short.status).toBe(1);
    expect(short.stderr).toMatch(/cut short/);
    // nothing of the failed attempt was left behind: the same DATA_DIR takes the whole file
    expect(fs.existsSync(path.join(fresh, 'pg'))).toBe(false);
    const notGzip = path.join(tmp, 'plain.backup');
    fs.writeFileSync(notGzip, 'hello\n');
    const bad = cli(['restore', notGzip], { DATA_DIR: fresh });
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/is not a complete Keywarden backup|is not a Keywarden backup/);
    expect(cli(['backup'], { DATA_DIR: dirB }).status).toBe(2);
    expect(cli(['backup', '--output', file], { DATA_DIR: dirB }).status).toBe(2);
    const unwritable = cli(['backup', '--out', path.join(tmp, 'no-such-dir', 'x.backup')], { DATA_DIR: dirB });
    expect(unwritable.status).toBe(1);
    expect(unwritable.stderr).toMatch(/^keywarden backup: cannot write .*x\.backup: ENOENT/);
  });

  it('restores into the empty database of DATABASE_URL, row for row', async () => {
    const db = await createTestDatabase();
    try {
      const r = cli(['restore', file], { DATA_DIR: path.join(tmp, 'd'), DATABASE_URL: db.url });
      expect(r.status, r.stderr).toBe(0);
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        const n = (await c.query<{ n: string }>('select count(*)::text as n from license_keys')).rows[0]!.n;
        expect(n).toBe('3');
      } finally {
        await c.end();
      }
      const again = cli(['restore', file], { DATA_DIR: path.join(tmp, 'e'), DATABASE_URL: db.url });
      expect(again.status).toBe(1);
      expect(again.stderr).toMatch(/refusing to restore into a database that is not empty/);
    } finally {
      await db.drop();
    }
  });
});

describe('one snapshot', { timeout: 120_000 }, () => {
  it('rows committed while the backup runs are in none of its tables', async () => {
    // The backup reads applications and license_keys, then finds license_keys locked; meanwhile a
    // device is bound to a key and committed. Read as one snapshot, key_devices (read after
    // license_keys) does not have it; read table by table, it would.
    const server = await startTestServer();
    const locker = new pg.Client({ connectionString: server.databaseUrl });
    const watcher = new pg.Client({ connectionString: server.databaseUrl });
    try {
      const owner = await new Api(server.base).signIn(TEST_OWNER.username, TEST_OWNER.password);
      const app = await owner.post('/api/apps', { name: 'Snapshot App' });
      await owner.post(`/api/apps/${app.body.id}/licenses`, { amount: 2, duration: 30, unit: 'days', level: 1 });
      await locker.connect();
      await watcher.connect();
      await locker.query('begin');
      await locker.query('lock table license_keys in access exclusive mode');
      const out = path.join(tmp, 'snapshot.backup');
      const backup = writeBackup(server.databaseUrl, { RESPONSE_SIGNING_KEY: 'k' }, out);
      // the backup waits for license_keys: another process's state, looked at until it shows
      for (;;) {
        const waiting = await watcher.query(
          `select 1 from pg_locks l join pg_class c on c.oid = l.relation
            where c.relname = 'license_keys' and not l.granted`,
        );
        if (waiting.rowCount! > 0) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      await locker.query(
        `insert into key_devices (license_id, hwid, first_seen, last_seen)
         select id, 'snapshot-hwid', now(), now() from license_keys limit 1`,
      );
      await locker.query('commit');
      const { rows } = await backup;
      expect(rows.license_keys).toBe(2);
      expect(rows.key_devices).toBe(0);
      expect(zlib.gunzipSync(fs.readFileSync(out)).toString('utf8')).not.toContain('snapshot-hwid');
      expect((await watcher.query('select count(*)::int as n from key_devices')).rows[0].n).toBe(1);
    } finally {
      await locker.end().catch(() => undefined);
      await watcher.end().catch(() => undefined);
      await server.close();
    }
  });
});
