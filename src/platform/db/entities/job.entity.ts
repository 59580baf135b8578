import { EntitySchema } from '@mikro-orm/core';

/**
 * A bulk job over an application's keys (docs/api.md "Bulk jobs"): one action applied to a set of
 * keys fixed when the job starts, by the worker that started it, in chunks. Progress is written after
 * each chunk so every worker answers for it.
 */
interface Job {
  id: string;
  appId: string;
  /** Who started it: the only one (with the owners above it) who sees it. */
  creatorId: string;
  action: string;
  params: Record<string, unknown>;
  status: string;
  total: number;
  done: number;
  succeeded: number;
  skipped: number;
  /** The first 1,000 skipped keys: {id, key_preview, reason}. */
  skippedKeys: unknown[];
  cancelRequested: boolean;
  createdAt: Date;
  /** Written with each chunk: a running job whose worker stopped writing is reported failed. */
  updatedAt: Date;
}

export const JobSchema = new EntitySchema<Job>({
  name: 'Job',
  tableName: 'jobs',
  indexes: [{ properties: ['createdAt'] }],
  properties: {
    id: { type: 'uuid', primary: true },
    appId: { type: 'uuid' },
    creatorId: { type: 'uuid' },
    action: { type: 'string', length: 16 },
    params: { type: 'json' },
    status: { type: 'string', length: 16 },
    total: { type: 'integer' },
    done: { type: 'integer' },
    succeeded: { type: 'integer' },
    skipped: { type: 'integer' },
    skippedKeys: { type: 'json' },
    cancelRequested: { type: 'boolean' },
    createdAt: { type: 'datetime' },
    updatedAt: { type: 'datetime' },
  },
});
