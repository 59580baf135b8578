// A single process without Redis keeps its activated client sessions and heartbeat sessions in
// memory. So that a restart ends no client's heartbeat, what changed is written to PostgreSQL
// every STATE_CHECKPOINT_MS (a crash loses at most that much) and once more on shutdown, after the
// last request has been answered (a graceful restart loses nothing); at start it is read back
// before the first request. Each source tracks its own changed keys; a checkpoint that fails (the
// database is away) hands them back, so they go with the next one.
import type { Logger } from 'pino';
import type { ProcessStateRepository, StateEntry } from './process-state.repository.js';

interface Changes {
  upserts: StateEntry[];
  deletes: string[];
}

/** Something whose state survives a restart through the checkpoint. */
interface CheckpointSource {
  /** process_state.kind of its entries. */
  readonly checkpointKind: string;
  /** Keys changed since the last call, with their current values (deleted: in `deletes`). */
  takeChanges(): Changes;
  /** Gives keys back after a failed write: they are written with the next checkpoint. */
  unsaved(keys: readonly string[]): void;
  restore(entries: readonly StateEntry[]): void;
}

const PURGE_EVERY = 60;

export class StateCheckpoint {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private ticks = 0;

  constructor(
    private readonly repo: ProcessStateRepository,
    private readonly sources: readonly CheckpointSource[],
    private readonly o: { log: Logger; now: () => number; everyMs: number },
  ) {}

  /** Reads every source's entries back; returns how many were restored. */
  async restore(): Promise<number> {
    let n = 0;
    const now = new Date(this.o.now());
    for (const s of this.sources) {
      const entries = await this.repo.load(s.checkpointKind, now);
      s.restore(entries);
      n += entries.length;
    }
    return n;
  }

  start(): void {
    if (this.o.everyMs <= 0) return;
    this.timer = setInterval(() => void this.checkpoint(), this.o.everyMs);
    this.timer.unref();
  }

  /** Writes what changed since the last checkpoint (one at a time). */
  checkpoint(): Promise<void> {
    this.running = this.running.then(() => this.write());
    return this.running;
  }

  /** The last checkpoint, after the last request (shutdown). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.checkpoint();
  }

  private async write(): Promise<void> {
    for (const s of this.sources) {
      const { upserts, deletes } = s.takeChanges();
      try {
        await this.repo.save(s.checkpointKind, upserts, deletes);
      } catch (err) {
        s.unsaved([...upserts.map((e) => e.key), ...deletes]);
        this.o.log.warn(
          { err, kind: s.checkpointKind, pending: upserts.length + deletes.length },
          'state.checkpoint_failed',
        );
      }
    }
    if (++this.ticks % PURGE_EVERY === 0) await this.repo.purgeExpired(new Date(this.o.now())).catch(() => undefined);
  }
}
