// A request body read as it arrives, for routes that take files (docs/releases.md "Artifacts"): the
// handler pulls chunks and writes them on; nothing holds the whole body. uWS hands each chunk in
// onData (its memory is reused afterwards: copied here); while more than HIGH_WATER bytes wait for
// the handler the socket is paused, and resumed once they fall under LOW_WATER, so a disk slower
// than the network holds the sender back instead of filling memory.
import type * as UwsTypes from 'uWebSockets.js';

const HIGH_WATER = 4 * 1024 * 1024;
const LOW_WATER = 1024 * 1024;

/** Why a streamed body ended early. */
export class BodyStreamError extends Error {
  constructor(readonly reason: 'too_large' | 'aborted') {
    super(`request body ${reason}`);
  }
}

/** The chunks of a streamed request body; iterating throws BodyStreamError past the limit or on abort. */
export interface BodyStream extends AsyncIterable<Buffer> {
  /** Whether every byte was read (a reply sent before that closes the connection). */
  readonly complete: boolean;
}

/** Starts reading `res`'s body; `abort()` is the response's onAborted signal. */
export function streamBody(res: UwsTypes.HttpResponse, limit: number): { body: BodyStream; abort(): void } {
  const queue: Buffer[] = [];
  let queued = 0;
  let size = 0;
  let ended = false;
  let failure: BodyStreamError | undefined;
  let paused = false;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  res.onData((chunk, isLast) => {
    if (failure) return;
    size += chunk.byteLength;
    if (size > limit) {
      failure = new BodyStreamError('too_large');
      queue.length = 0;
      queued = 0;
    } else if (chunk.byteLength > 0) {
      queue.push(Buffer.from(chunk.slice(0)));
      queued += chunk.byteLength;
      if (queued > HIGH_WATER && !paused && !isLast) {
        paused = true;
        res.pause();
      }
    }
    if (isLast) ended = true;
    notify();
  });
  const body: BodyStream = {
    get complete() {
      return ended && !failure;
    },
    async *[Symbol.asyncIterator]() {
      for (;;) {
        if (failure) throw failure;
        const next = queue.shift();
        if (next) {
          queued -= next.byteLength;
          if (paused && queued < LOW_WATER) {
            paused = false;
            res.resume();
          }
          yield next;
          continue;
        }
        if (ended) return;
        await new Promise<void>((resolve) => (wake = resolve));
      }
    },
  };
  return {
    body,
    abort() {
      failure ??= new BodyStreamError('aborted');
      notify();
    },
  };
}
