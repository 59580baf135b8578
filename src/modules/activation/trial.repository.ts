// Trials (docs/protocol.md 12.4): the key of a trial is created already activated license-only on the
// caller's HWID (by the keys module, which owns keys and devices), and the trial is recorded under
// (application, HWID) in the same transaction. That
// primary key is the whole guard: of concurrent trials for one HWID exactly one inserts its row
// (the others wait on it and then find it), and the row outlives the key, so a deleted trial key
// does not give the device a second trial.
import { randomUUID } from 'node:crypto';
import type { Sql } from '../../platform/db/sql.js';

/** A trial key as the keys module stores it. */
type TrialKeyRow = TrialKey & { licenseId: string; expiresAt: Date };

interface TrialKey {
  appId: string;
  hwid: string;
  ip: string;
  keyHash: string;
  keyPreview: string;
  level: number;
  hours: number;
  now: Date;
}

type TrialResult = { kind: 'created'; licenseId: string; expiresAt: Date } | { kind: 'used' } | { kind: 'collision' };

class Used extends Error {}

export class TrialRepository {
  constructor(
    private readonly sql: Sql,
    /** The keys module: the trial key, activated on its HWID, inserted inside the trial's transaction. */
    private readonly keys: { insertTrialKey(k: TrialKeyRow, tx: unknown): Promise<boolean> },
  ) {}

  async create(t: TrialKey): Promise<TrialResult> {
    const licenseId = randomUUID();
    const expiresAt = new Date(t.now.getTime() + t.hours * 3_600_000);
    try {
      return await this.sql.transaction(async (tx) => {
        const taken = await this.sql.one(
          `insert into trials (app_id, hwid, license_id, created_at) values (?, ?, ?, ?)
           on conflict (app_id, hwid) do nothing returning hwid`,
          [t.appId, t.hwid, licenseId, t.now],
          tx,
        );
        if (!taken) throw new Used();
        const inserted = await this.keys.insertTrialKey({ ...t, licenseId, expiresAt }, tx);
        if (!inserted) return { kind: 'collision' as const };
        return { kind: 'created' as const, licenseId, expiresAt };
      });
    } catch (err) {
      if (err instanceof Used) return { kind: 'used' };
      throw err;
    }
  }
}
