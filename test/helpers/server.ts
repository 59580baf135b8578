// A real Keywarden server on port 0 with its own fresh database on the run's PostgreSQL server.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startServer, type RunningServer } from '../../src/main.js';
import { randomHex } from '../../src/platform/crypto/index.js';
import { createLogger } from '../../src/logger.js';
import type { Clock } from '../../src/clock.js';

export interface TestServer {
  readonly base: string;
  readonly server: RunningServer;
  readonly databaseUrl: string;
  readonly dataDir: string;
  close(): Promise<void>;
}

function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

export async function createTestDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = inject('adminDatabaseUrl');
  const name = `kw_test_${randomHex(6)}`;
  const client = new pg.Client({ connectionString: admin });
  await client.connect();
  await client.query(`create database "${name}"`);
  await client.end();
  return {
    url: withDatabase(admin, name),
    drop: async () => {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`drop database if exists "${name}" with (force)`);
      await c.end();
    },
  };
}

export const OWNER = { username: 'owner', password: 'owner-pass-1' };

export async function startTestServer(
  env: Record<string, string> = {},
  opts: { clock?: Clock; databaseUrl?: string; dataDir?: string } = {},
): Promise<TestServer> {
  const db = opts.databaseUrl ? undefined : await createTestDatabase();
  const databaseUrl = opts.databaseUrl ?? db!.url;
  const dataDir = opts.dataDir ?? (await fs.mkdtemp(path.join(os.tmpdir(), 'kw-test-')));
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    DATABASE_URL: databaseUrl,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    OWNER_USERNAME: OWNER.username,
    OWNER_PASSWORD: OWNER.password,
    SHUTDOWN_TIMEOUT_MS: '5000',
    ...env,
  });
  const server = await startServer(config, { log: createLogger(config), ...(opts.clock ? { clock: opts.clock } : {}) });
  return {
    base: `http://127.0.0.1:${server.port}`,
    server,
    databaseUrl,
    dataDir,
    close: async () => {
      await server.shutdown('test');
      await db?.drop();
      if (!opts.dataDir) await fs.rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Stores an account directly through the repository (the team API comes with its own routes). */
export async function createAccount(
  t: TestServer,
  a: {
    username: string;
    password: string;
    role?: 'owner' | 'admin' | 'reseller';
    parentId?: string | null;
    ownerId?: string;
    email?: string | null;
  },
) {
  const { hashPassword } = await import('../../src/platform/crypto/index.js');
  return t.server.app.domain.access.accounts.create(
    {
      username: a.username,
      passwordHash: await hashPassword(a.password),
      role: a.role ?? 'owner',
      parentId: a.parentId ?? null,
      ...(a.ownerId ? { ownerId: a.ownerId } : {}),
      email: a.email ?? null,
      webhookSecret: 'test-secret',
    },
    new Date(),
  );
}
