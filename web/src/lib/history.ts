// The last generated batches (docs/spec.md "Limits": 5), kept in sessionStorage: they survive a reload of
// this tab and are gone when the browser session ends. Nothing of it reaches the server.

export const HISTORY_KEY = 'keywarden.batches';
export const HISTORY_LIMIT = 5;

export interface BatchKey {
  id: string;
  key: string;
  level: number;
  duration_value: number | null;
  duration_unit: string;
  note: string;
}

export interface Batch {
  id: string;
  at: string;
  app_id: string;
  app_name: string;
  keys: BatchKey[];
}

type StorageLike = Pick<Storage, 'getItem' | 'setItem'>;

export function readBatches(storage: StorageLike | undefined = globalThis.sessionStorage): Batch[] {
  try {
    const raw = storage?.getItem(HISTORY_KEY);
    const list = raw ? (JSON.parse(raw) as unknown) : [];
    return Array.isArray(list) ? (list as Batch[]).slice(0, HISTORY_LIMIT) : [];
  } catch {
    return [];
  }
}

/** Adds a batch in front and keeps the newest five. */
export function rememberBatch(batch: Batch, storage: StorageLike | undefined = globalThis.sessionStorage): Batch[] {
  const list = [batch, ...readBatches(storage).filter((b) => b.id !== batch.id)].slice(0, HISTORY_LIMIT);
  try {
    storage?.setItem(HISTORY_KEY, JSON.stringify(list));
  } catch {
    // storage full or disabled: the batch is still shown now
  }
  return list;
}
