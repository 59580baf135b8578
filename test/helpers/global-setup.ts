// One PostgreSQL server for the whole run: TEST_DATABASE_URL or DATABASE_URL when given (CI's
// server), else an embedded one in a temporary DATA_DIR. Each test server then creates its own
// database on it (test/helpers/server.ts), so files never see each other's data.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { pino } from 'pino';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../src/platform/db/embedded-postgres.js';

let embedded: EmbeddedPostgres | undefined;
let dir: string | undefined;

export async function setup(project: TestProject): Promise<void> {
  let url = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL;
  if (!url) {
    dir = await fs.mkdtemp(path.join(os.tmpdir(), 'kw-testpg-'));
    embedded = await startEmbeddedPostgres(dir, pino({ level: 'warn' }));
    const t = embedded.target;
    url = `postgresql://${t.user}:${encodeURIComponent(t.password)}@localhost:${t.port}/postgres?host=${encodeURIComponent(t.host)}`;
  }
  project.provide('adminDatabaseUrl', url);
}

export async function teardown(): Promise<void> {
  await embedded?.stop();
  if (dir) await fs.rm(dir, { recursive: true, force: true });
}
