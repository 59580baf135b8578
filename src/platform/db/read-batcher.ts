// Reads that arrive in one turn of the event loop go to the database as one statement: a call
// asks for one row and gets a promise; at the end of the turn (setImmediate: after every request
// uWS delivered in this poll) the keys asked for are read together and each caller gets its own
// answer. Every read still starts after the call that asked for it arrived, so it sees every
// write committed before that call (a dashboard change is never missed, unlike a cache), and a
// fleet's concurrent calls share one round trip, one statement and one plan. A failed statement
// fails every read of its batch (the callers answer 503 as for a failed read of their own).

/** Rows per statement: one array parameter per column, so the limit is the plan's size, not binds. */
const MAX_BATCH = 500;

interface Waiter<V> {
  resolve: (v: V) => void;
  reject: (err: unknown) => void;
}

export class ReadBatcher<K, V> {
  private keys: K[] = [];
  private waiters: Waiter<V>[] = [];
  private scheduled = false;

  /** `readMany` answers one value per key, in the keys' order. */
  constructor(
    private readonly readMany: (keys: readonly K[]) => Promise<V[]>,
    private readonly maxBatch = MAX_BATCH,
  ) {}

  load(key: K): Promise<V> {
    return new Promise<V>((resolve, reject) => {
      this.keys.push(key);
      this.waiters.push({ resolve, reject });
      if (this.keys.length >= this.maxBatch) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const keys = this.keys;
    const waiters = this.waiters;
    if (keys.length === 0) return;
    this.keys = [];
    this.waiters = [];
    this.readMany(keys).then(
      (values) => {
        for (let i = 0; i < waiters.length; i++) waiters[i]!.resolve(values[i]!);
      },
      (err: unknown) => {
        for (const w of waiters) w.reject(err);
      },
    );
  }
}
