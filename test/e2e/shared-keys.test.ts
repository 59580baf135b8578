// Hosts of one deployment share RESPONSE_SIGNING_KEY, LICENSE_HASH_KEY and TWO_FACTOR_KEY. The first host to start
// records a keyed fingerprint of each in PostgreSQL (never the key); a host started with other keys
// refuses to start and says what to copy; `keywarden secrets export` / `import` carry them.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/server.js';
import { spawnServer } from '../helpers/process.js';

const root = path.resolve(import.meta.dirname, '../..');
const dirs = [0, 1].map(() => fs.mkdtempSync(path.join(os.tmpdir(), 'kw-keys-')));
let db: Awaited<ReturnType<typeof createTestDatabase>>;

function cli(args: string[], env: Record<string, string>, input = '') {
  return spawnSync(process.execPath, ['--import', 'tsx', path.join(root, 'src/cli.ts'), ...args], {
    cwd: root,
    env: { ...process.env, LOG_LEVEL: 'warn', REDIS_URL: '', ...env },
    input,
    encoding: 'utf8',
  });
}

beforeAll(async () => {
  db = await createTestDatabase();
});
afterAll(async () => {
  await db?.drop();
  for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
});

describe('keys shared by every host', () => {
  it('a host with other keys refuses to start; after secrets export/import it starts', async () => {
    const env = (i: number) => ({ DATABASE_URL: db.url, DATA_DIR: dirs[i]! });
    // The first host makes its keys in its DATA_DIR and records their fingerprints.
    const first = await spawnServer(env(0));
    await first.stop('SIGTERM');
    const client = new pg.Client({ connectionString: db.url });
    await client.connect();
    const rows = (await client.query('select name, fingerprint from deployment_keys order by name')).rows as {
      name: string;
      fingerprint: string;
    }[];
    await client.end();
    expect(rows.map((r) => r.name)).toEqual(['license_hash', 'response_signing:k1', 'two_factor']);
    const licenseKey = fs.readFileSync(path.join(dirs[0]!, 'secrets', 'license-hash.key'), 'utf8').trim();
    const seed = fs.readFileSync(path.join(dirs[0]!, 'secrets', 'response-signing-k1.seed'), 'utf8').trim();
    for (const r of rows) {
      expect(r.fingerprint).toMatch(/^[0-9a-f]{64}$/);
      // A keyed hash, never the key in any encoding.
      for (const k of [licenseKey, seed])
        expect([k, Buffer.from(k, 'base64').toString('hex')].some((v) => r.fingerprint.includes(v))).toBe(false);
    }

    // The second host, with keys of its own: refused, with what to do.
    const said = await spawnServer(env(1)).then(
      () => 'started',
      (e: unknown) => String(e),
    );
    expect(said).toContain('server exited (1) before listening');
    expect(said).toContain('LICENSE_HASH_KEY');
    expect(said).toContain('RESPONSE_SIGNING_KEY');
    expect(said).toContain('keywarden secrets export');

    // Carried over: export on the first, import on the second.
    const exported = cli(['secrets', 'export'], env(0));
    expect(exported.status, exported.stderr).toBe(0);
    expect(exported.stdout).toContain(`LICENSE_HASH_KEY=${licenseKey}\n`);
    expect(exported.stdout).toContain(`RESPONSE_SIGNING_KEY=${seed}\n`);
    expect(exported.stdout).toMatch(/^TWO_FACTOR_KEY=\S+$/m);
    // The second host's own (different) keys are kept unless --force.
    const refused = cli(['secrets', 'import'], env(1), exported.stdout);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toContain('--force');
    const imported = cli(['secrets', 'import', '--force'], env(1), exported.stdout);
    expect(imported.status, imported.stderr).toBe(0);
    expect(fs.statSync(path.join(dirs[1]!, 'secrets', 'license-hash.key')).mode & 0o777).toBe(0o600);
    // Incomplete input is refused with a message, not a stack trace.
    const partial = cli(['secrets', 'import'], env(1), 'LICENSE_HASH_KEY=abc\n');
    expect(partial.status).toBe(1);
    expect(partial.stderr).toContain('RESPONSE_SIGNING_KEY is missing');

    const again = await spawnServer(env(1));
    await again.stop('SIGTERM');

    // docs/protocol.md 11.40: every shared secret is fingerprinted, the two-factor key too. The same signing
    // and license keys with another TWO_FACTOR_KEY: refused, naming that one alone as differing.
    const otherTwoFactor = await spawnServer({
      ...env(1),
      TWO_FACTOR_KEY: Buffer.alloc(32, 7).toString('base64'),
    }).then(
      () => 'started',
      (e: unknown) => String(e),
    );
    expect(otherTwoFactor).toContain('server exited (1) before listening');
    expect(otherTwoFactor).toContain('TWO_FACTOR_KEY (fingerprint');
    expect(otherTwoFactor).not.toContain('LICENSE_HASH_KEY (fingerprint');
    expect(otherTwoFactor).not.toContain('RESPONSE_SIGNING_KEY (fingerprint');
  }, 120_000);
});
