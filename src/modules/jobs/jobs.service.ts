// Bulk jobs (docs/api.md "Bulk jobs"): one action over many keys as one server job instead of one
// request per key. The set of keys is fixed when the job starts (the key listing's filters, or ids);
// each key then goes through the single action itself, with the caller's rights and that action's
// rules, so a key the single action refuses is skipped with its `detail`. Keys are taken a chunk at a
// time, a few at once; progress is written after each chunk (every worker answers for the job) and
// sent live to the creator at least once a second; a cancel stops the job after the chunk in flight.
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { AppError, ERRORS, ValidationError } from '../../errors.js';
import type { Actor, Principal } from '../access/index.js';
import type { JobRecord, JobRepository, SkippedKey } from './job.repository.js';

export const JOB_ACTIONS = ['extend', 'ban', 'unban', 'delete', 'reset_hwid'] as const;
type JobAction = (typeof JOB_ACTIONS)[number];

/** The key listing's filters a job may be given instead of ids. */
interface KeyFilter {
  status?: string | undefined;
  q?: string | undefined;
}

interface ExtendParams {
  value: number;
  unit: 'hours' | 'days' | 'weeks' | 'months';
  subtract?: boolean | undefined;
}

/** What the jobs module needs of the keys module: the set to act on, and the single actions. */
export interface KeyActions {
  matching(
    p: Principal,
    appId: string,
    f: KeyFilter & { ids?: readonly string[] | undefined },
  ): Promise<{ id: string; key_preview: string }[]>;
  extend(p: Principal, id: string, params: ExtendParams): Promise<unknown>;
  setBanned(p: Principal, id: string, banned: boolean): Promise<unknown>;
  remove(p: Principal, id: string): Promise<void>;
  resetHwid(p: Principal, id: string): Promise<void>;
}

interface JobsDeps {
  repo: JobRepository;
  keys: KeyActions;
  audit: {
    write(e: { appId: string; action: string; detail: string; actor: Actor; level?: 'info' | 'warning' }): void;
  };
  /** A live event to one account's open dashboards. */
  notify(accountId: string, data: Record<string, unknown>): Promise<void>;
  actorOf(p: Principal): Actor;
  /** Whether `viewer` may see a job `creatorId` started: the creator itself, or an owner above it. */
  mayView(viewer: Principal, creatorId: string): Promise<boolean>;
  now: () => number;
  log: Logger;
}

/** Keys per chunk: progress is written and a cancel is seen between chunks. */
const CHUNK = 250;
/** Single actions in flight at once within a chunk. */
const PARALLEL = 8;
/** Skipped keys kept for the answer. */
const SKIPPED_KEPT = 1000;
/** Progress goes out at least this often while a job runs. */
const PROGRESS_MS = 1000;
/** A running job whose progress is older than this was left by a worker that stopped: it failed. */
const STALE_MS = 120_000;

interface StartJob {
  action: JobAction;
  ids?: readonly string[] | undefined;
  filter?: KeyFilter | undefined;
  params?: Record<string, unknown> | undefined;
}

export class JobsService {
  private readonly inflight = new Set<Promise<void>>();

  constructor(private readonly d: JobsDeps) {}

  async start(p: Principal, appId: string, body: StartJob): Promise<JobRecord> {
    const ids = body.ids ? [...new Set(body.ids.map((id) => id.toLowerCase()))] : undefined;
    const targets = await this.d.keys.matching(p, appId, { ...(body.filter ?? {}), ids });
    const now = new Date(this.d.now());
    const job: JobRecord = {
      id: randomUUID(),
      appId,
      creatorId: p.account.id,
      action: body.action,
      params: body.params ?? {},
      status: 'running',
      total: ids ? ids.length : targets.length,
      done: 0,
      succeeded: 0,
      skipped: 0,
      skippedKeys: [],
      cancelRequested: false,
      createdAt: now,
      updatedAt: now,
    };
    if (ids) {
      // Ids outside the app or the caller's scope do not exist for it: skipped as the single action would.
      const found = new Set(targets.map((t) => t.id));
      const notFound = ERRORS.license_not_found.detail;
      for (const id of ids) if (!found.has(id)) this.skip(job, { id, key_preview: null }, notFound);
    }
    await this.d.repo.insert(job);
    const run = this.run(p, job, targets).catch((err: unknown) => this.d.log.error({ err, job: job.id }, 'job.failed'));
    this.inflight.add(run);
    void run.finally(() => this.inflight.delete(run));
    return { ...job, skippedKeys: [...job.skippedKeys] };
  }

  /** The job as the viewer may see it; 404 for anyone else. */
  async get(p: Principal, id: string): Promise<JobRecord> {
    const job = await this.d.repo.find(id);
    if (!job || !(await this.d.mayView(p, job.creatorId))) throw new AppError('job_not_found');
    if (job.status === 'running' && this.d.now() - job.updatedAt.getTime() > STALE_MS) job.status = 'failed';
    return job;
  }

  async cancel(p: Principal, id: string): Promise<JobRecord> {
    const job = await this.get(p, id);
    if (job.status === 'running') await this.d.repo.requestCancel(id);
    return { ...job, cancelRequested: job.status === 'running' };
  }

  /** Waits for the jobs under way (shutdown, tests). */
  async drain(): Promise<void> {
    await Promise.allSettled([...this.inflight]);
  }

  private async run(p: Principal, job: JobRecord, targets: { id: string; key_preview: string }[]): Promise<void> {
    let sent = 0;
    const send = () => {
      sent = this.d.now();
      this.d
        .notify(job.creatorId, progressData(job))
        .catch((err: unknown) => this.d.log.warn({ err, job: job.id }, 'job.progress_not_sent'));
    };
    const ticker = setInterval(send, PROGRESS_MS);
    ticker.unref();
    send();
    try {
      for (let at = 0; at < targets.length; at += CHUNK) {
        const chunk = targets.slice(at, at + CHUNK);
        for (let i = 0; i < chunk.length; i += PARALLEL)
          await Promise.all(chunk.slice(i, i + PARALLEL).map((t) => this.one(p, job, t)));
        job.updatedAt = new Date(this.d.now());
        const cancelled = await this.d.repo.progress(job);
        if (this.d.now() - sent >= PROGRESS_MS / 4) send();
        if (cancelled && at + CHUNK < targets.length) {
          job.status = 'cancelled';
          break;
        }
      }
      if (job.status === 'running') job.status = 'done';
    } catch (err) {
      job.status = 'failed';
      this.d.log.error({ err, job: job.id }, 'job.failed');
    } finally {
      clearInterval(ticker);
    }
    job.updatedAt = new Date(this.d.now());
    await this.d.repo.finish(job);
    send();
    this.d.audit.write({
      appId: job.appId,
      action: `job.${job.action}`,
      level: job.status === 'done' ? 'info' : 'warning',
      actor: this.d.actorOf(p),
      detail:
        `Bulk ${job.action} ${job.status}: ${job.succeeded} of ${job.total} keys done, ${job.skipped} skipped` +
        (job.done < job.total ? `, ${job.total - job.done} not reached` : ''),
    });
  }

  /** One key through the single action; a refusal skips it with that action's detail. */
  private async one(p: Principal, job: JobRecord, t: { id: string; key_preview: string }): Promise<void> {
    try {
      await this.act(p, job, t.id);
      job.succeeded++;
      job.done++;
    } catch (err) {
      if (err instanceof AppError)
        this.skip(job, t, typeof err.detail === 'string' ? err.detail : ERRORS[err.code].detail);
      else if (err instanceof ValidationError) this.skip(job, t, err.issues.map((i) => i.msg).join('; '));
      else throw err;
    }
  }

  private act(p: Principal, job: JobRecord, id: string): Promise<unknown> {
    const keys = this.d.keys;
    switch (job.action as JobAction) {
      case 'extend':
        return keys.extend(p, id, job.params as unknown as ExtendParams);
      case 'ban':
        return keys.setBanned(p, id, true);
      case 'unban':
        return keys.setBanned(p, id, false);
      case 'delete':
        return keys.remove(p, id);
      case 'reset_hwid':
        return keys.resetHwid(p, id);
    }
  }

  private skip(job: JobRecord, t: { id: string; key_preview: string | null }, reason: string): void {
    job.skipped++;
    job.done++;
    const kept: SkippedKey = { id: t.id, key_preview: t.key_preview, reason };
    if (job.skippedKeys.length < SKIPPED_KEPT) job.skippedKeys.push(kept);
  }
}

function progressData(j: JobRecord): Record<string, unknown> {
  return {
    id: j.id,
    app_id: j.appId,
    action: j.action,
    status: j.status,
    total: j.total,
    done: j.done,
    succeeded: j.succeeded,
    skipped: j.skipped,
  };
}
