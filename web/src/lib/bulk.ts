// Bulk actions (docs/spec.md: "one request per row, report counts as succeeded and failed"): a few
// requests at a time, progress after each, every failure kept with the server's detail, and a
// Cancel (an aborted signal) that sends nothing more; requests already sent finish and count.

export interface BulkFailure<T> {
  item: T;
  detail: string;
}

export interface BulkResult<T> {
  succeeded: number;
  failed: BulkFailure<T>[];
  /** Rows never sent because the run was cancelled. */
  notSent: number;
}

export async function runBulk<T>(
  items: readonly T[],
  action: (item: T) => Promise<unknown>,
  onProgress: (done: number, total: number) => void = () => undefined,
  { concurrency = 4, signal }: { concurrency?: number; signal?: AbortSignal } = {},
): Promise<BulkResult<T>> {
  const result: BulkResult<T> = { succeeded: 0, failed: [], notSent: 0 };
  let next = 0;
  let done = 0;
  onProgress(0, items.length);
  const worker = async () => {
    while (next < items.length && !signal?.aborted) {
      const item = items[next++]!;
      try {
        await action(item);
        result.succeeded++;
      } catch (err) {
        result.failed.push({ item, detail: err instanceof Error ? err.message : String(err) });
      }
      onProgress(++done, items.length);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  result.notSent = items.length - done;
  return result;
}
