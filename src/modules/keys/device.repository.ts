// Devices of keys (license-only use) and of end users (docs/protocol.md 12.1). Every HWID that activated or
// logged in is recorded; `bound` rows are the ones that hold one of the limit's places under
// hwid_lock (docs/spec.md's single pinned HWID is the limit 1). Admission is decided in PostgreSQL: the
// holder's row is locked (SELECT ... FOR UPDATE) before the bound devices are counted, so concurrent
// activations from new HWIDs, on any worker, take turns and never exceed the limit.
import { toDate, type Sql } from '../../platform/db/sql.js';

export type DeviceHolderKind = 'key' | 'user';

const TABLES = {
  key: { table: 'key_devices', column: 'license_id', holder: 'license_keys' },
  user: { table: 'user_devices', column: 'user_id', holder: 'end_users' },
} as const;

export interface Device {
  hwid: string;
  first_seen: string;
  last_seen: string;
}

/** What the policy needs to know before an activation: is this HWID held, and how many are. */
export interface DeviceFacts {
  /** A row exists for the HWID (bound or not). */
  known: boolean;
  /** The HWID holds a place. */
  held: boolean;
  /** Places taken. */
  bound: number;
}

type Admission = { result: 'held' | 'added'; isNew: boolean } | { result: 'full'; isNew: false };

interface DeviceRow {
  owner: string;
  hwid: string;
  first_seen: Date | string;
  last_seen: Date | string;
}

const iso = (d: Date | string) => toDate(d)!.toISOString();

/** The aggregates DeviceFacts is read from, over one holder's device rows; `hwid` is an SQL expression. */
export function deviceFactsSql(hwid: string): string {
  return `count(*) filter (where bound) as bound, bool_or(hwid = ${hwid}) as known,
    bool_or(hwid = ${hwid} and bound) as held`;
}

export interface DeviceFactsRow {
  bound: string | null;
  known: boolean | null;
  held: boolean | null;
}

/** DeviceFacts from the columns of deviceFactsSql (a holder without devices: none known, none bound). */
export function deviceFactsOf(r: DeviceFactsRow | undefined): DeviceFacts {
  return { known: r?.known === true, held: r?.held === true, bound: Number(r?.bound ?? 0) };
}

export class DeviceRepository {
  constructor(private readonly sql: Sql) {}

  async facts(kind: DeviceHolderKind, id: string, hwid: string): Promise<DeviceFacts> {
    const t = TABLES[kind];
    const r = await this.sql.one<DeviceFactsRow>(
      `select ${deviceFactsSql('?')} from ${t.table} where ${t.column} = ?`,
      [hwid, hwid, id],
    );
    return deviceFactsOf(r);
  }

  /**
   * Records `hwid` for the holder. `enforce` (hwid_lock on): a HWID that holds no place takes one
   * while fewer than `limit` are taken, else 'full' and nothing is written. Not enforced: recorded,
   * and it takes a place only when `bindIfRoom` and a place is free (a key's first HWID is pinned
   * whatever the lock, as docs/spec.md's license-only activation does).
   */
  async admit(
    kind: DeviceHolderKind,
    id: string,
    hwid: string,
    o: { limit: number; enforce: boolean; bindIfRoom: boolean; now: Date },
  ): Promise<Admission> {
    const t = TABLES[kind];
    return this.sql.transaction(async (tx) => {
      // The holder's row is the lock every admission to it queues on (across workers too).
      await this.sql.one(`select 1 from ${t.holder} where id = ? for update`, [id], tx);
      const row = await this.sql.one<{ bound: boolean }>(
        `select bound from ${t.table} where ${t.column} = ? and hwid = ?`,
        [id, hwid],
        tx,
      );
      if (row?.bound) {
        await this.sql.run(
          `update ${t.table} set last_seen = ? where ${t.column} = ? and hwid = ?`,
          [o.now, id, hwid],
          tx,
        );
        return { result: 'held', isNew: false };
      }
      let bind = false;
      if (o.enforce || o.bindIfRoom) {
        const taken = await this.sql.one<{ n: string }>(
          `select count(*) as n from ${t.table} where ${t.column} = ? and bound`,
          [id],
          tx,
        );
        bind = Number(taken?.n ?? 0) < o.limit;
        if (o.enforce && !bind) return { result: 'full', isNew: false };
      }
      await this.sql.run(
        `insert into ${t.table} (${t.column}, hwid, first_seen, last_seen, bound) values (?, ?, ?, ?, ?)
         on conflict (${t.column}, hwid) do update set last_seen = excluded.last_seen,
           bound = ${t.table}.bound or excluded.bound`,
        [id, hwid, o.now, o.now, bind],
        tx,
      );
      return { result: bind || !o.enforce ? (row ? 'held' : 'added') : 'held', isNew: !row };
    });
  }

  /** Devices of many holders at once, oldest first: the listings' `devices`. */
  async of(kind: DeviceHolderKind, ids: readonly string[]): Promise<Map<string, Device[]>> {
    const out = new Map<string, Device[]>();
    if (ids.length === 0) return out;
    const t = TABLES[kind];
    const rows = await this.sql.all<DeviceRow>(
      `select ${t.column} as owner, hwid, first_seen, last_seen from ${t.table}
       where ${t.column} in (${ids.map(() => '?').join(',')}) order by first_seen, hwid`,
      [...ids],
    );
    for (const r of rows) {
      const list = out.get(r.owner) ?? [];
      list.push({ hwid: r.hwid, first_seen: iso(r.first_seen), last_seen: iso(r.last_seen) });
      out.set(r.owner, list);
    }
    return out;
  }

  /**
   * Removes one device; false when the holder has none of that HWID. The holder's pinned `hwid`
   * (the first device) moves to its next bound device, or is cleared.
   */
  async remove(kind: DeviceHolderKind, id: string, hwid: string): Promise<boolean> {
    const t = TABLES[kind];
    return this.sql.transaction(async (tx) => {
      await this.sql.one(`select 1 from ${t.holder} where id = ? for update`, [id], tx);
      const gone = await this.sql.run(`delete from ${t.table} where ${t.column} = ? and hwid = ?`, [id, hwid], tx);
      if (gone === 0) return false;
      await this.sql.run(
        `update ${t.holder} set hwid = coalesce((select d.hwid from ${t.table} d where d.${t.column} = ?
           and d.bound order by d.first_seen, d.hwid limit 1), '')
         where id = ? and hwid = ?`,
        [id, id, hwid],
        tx,
      );
      if (kind === 'user')
        await this.sql.run(
          `update end_users set known_hwids = coalesce(
             (select jsonb_agg(h) from jsonb_array_elements_text(known_hwids) h where h <> ?), '[]'::jsonb)
           where id = ?`,
          [hwid, id],
          tx,
        );
      return true;
    });
  }
}
