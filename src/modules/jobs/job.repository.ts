// The jobs table (docs/api.md "Bulk jobs"), owned by the jobs module.
import type { Sql } from '../../platform/db/sql.js';
import { toDate } from '../../platform/db/sql.js';

type JobStatus = 'running' | 'done' | 'cancelled' | 'failed';

export interface SkippedKey {
  id: string;
  key_preview: string | null;
  reason: string;
}

export interface JobRecord {
  id: string;
  appId: string;
  creatorId: string;
  action: string;
  params: Record<string, unknown>;
  status: JobStatus;
  total: number;
  done: number;
  succeeded: number;
  skipped: number;
  skippedKeys: SkippedKey[];
  cancelRequested: boolean;
  createdAt: Date;
  updatedAt: Date;
}

interface JobRow {
  id: string;
  app_id: string;
  creator_id: string;
  action: string;
  params: Record<string, unknown>;
  status: JobStatus;
  total: number;
  done: number;
  succeeded: number;
  skipped: number;
  skipped_keys: SkippedKey[];
  cancel_requested: boolean;
  created_at: Date | string;
  updated_at: Date | string;
}

function fromRow(r: JobRow): JobRecord {
  return {
    id: r.id,
    appId: r.app_id,
    creatorId: r.creator_id,
    action: r.action,
    params: r.params,
    status: r.status,
    total: r.total,
    done: r.done,
    succeeded: r.succeeded,
    skipped: r.skipped,
    skippedKeys: r.skipped_keys,
    cancelRequested: r.cancel_requested,
    createdAt: toDate(r.created_at)!,
    updatedAt: toDate(r.updated_at)!,
  };
}

export class JobRepository {
  constructor(private readonly sql: Sql) {}

  async insert(j: JobRecord): Promise<void> {
    await this.sql.run(
      `insert into jobs (id, app_id, creator_id, action, params, status, total, done, succeeded, skipped, skipped_keys,
         cancel_requested, created_at, updated_at)
       values (?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?, ?::jsonb, false, ?, ?)`,
      [
        j.id,
        j.appId,
        j.creatorId,
        j.action,
        JSON.stringify(j.params),
        j.status,
        j.total,
        j.done,
        j.succeeded,
        j.skipped,
        JSON.stringify(j.skippedKeys),
        j.createdAt,
        j.updatedAt,
      ],
    );
  }

  async find(id: string): Promise<JobRecord | undefined> {
    const row = await this.sql.one<JobRow>(`select * from jobs where id = ?`, [id]);
    return row && fromRow(row);
  }

  /** Writes a running job's progress; answers whether someone asked to cancel it meanwhile. */
  async progress(j: JobRecord): Promise<boolean> {
    const row = await this.sql.one<{ cancel_requested: boolean }>(
      `update jobs set done = ?, succeeded = ?, skipped = ?, skipped_keys = ?::jsonb, updated_at = ?
       where id = ? returning cancel_requested`,
      [j.done, j.succeeded, j.skipped, JSON.stringify(j.skippedKeys), j.updatedAt, j.id],
    );
    return row?.cancel_requested === true;
  }

  async finish(j: JobRecord): Promise<void> {
    await this.sql.run(
      `update jobs set status = ?, done = ?, succeeded = ?, skipped = ?, skipped_keys = ?::jsonb, updated_at = ?
       where id = ?`,
      [j.status, j.done, j.succeeded, j.skipped, JSON.stringify(j.skippedKeys), j.updatedAt, j.id],
    );
  }

  /** Asks a running job to stop after its chunk in flight. */
  async requestCancel(id: string): Promise<void> {
    await this.sql.run(`update jobs set cancel_requested = true where id = ? and status = 'running'`, [id]);
  }
}
