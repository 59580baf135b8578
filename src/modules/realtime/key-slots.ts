// The MAC keys of open channel connections, 64 bytes each (s2c then c2s) in shared 64 KiB slabs.
// A connection holds its keys as long as it is open; a Buffer of its own would cost an ArrayBuffer
// and a backing store (about 575 bytes with their bookkeeping, measured with
// `bench/memory-live.ts --channel --snapshot`), and copies into Node's Buffer pool would pin
// whole 8 KiB pool slabs shared with short-lived buffers. A released slot is zeroed and reused;
// the slabs stay (64 bytes per connection at the peak).
import type { ChannelKeys } from './client-channel.protocol.js';

const KEY_BYTES = 32;
const SLOT_BYTES = 2 * KEY_BYTES;
const SLOTS_PER_SLAB = 1024;

export class KeySlots {
  private readonly slabs: Buffer[] = [];
  private readonly free: number[] = [];
  private used = 0;

  /** Stores a connection's keys; the slot names them until release(). */
  take(keys: ChannelKeys): number {
    let slot = this.free.pop();
    if (slot === undefined) {
      slot = this.used++;
      if (slot % SLOTS_PER_SLAB === 0) this.slabs.push(Buffer.alloc(SLOTS_PER_SLAB * SLOT_BYTES));
    }
    const [slab, at] = this.locate(slot);
    slab.set(keys.s2c, at);
    slab.set(keys.c2s, at + KEY_BYTES);
    return slot;
  }

  /** Server-to-client MAC key (a view: valid until the slot is released). */
  s2c(slot: number): Buffer {
    const [slab, at] = this.locate(slot);
    return slab.subarray(at, at + KEY_BYTES);
  }

  /** Client-to-server MAC key (a view: valid until the slot is released). */
  c2s(slot: number): Buffer {
    const [slab, at] = this.locate(slot);
    return slab.subarray(at + KEY_BYTES, at + SLOT_BYTES);
  }

  release(slot: number): void {
    const [slab, at] = this.locate(slot);
    slab.fill(0, at, at + SLOT_BYTES);
    this.free.push(slot);
  }

  /** Slots in use. */
  get size(): number {
    return this.used - this.free.length;
  }

  private locate(slot: number): [Buffer, number] {
    return [this.slabs[Math.floor(slot / SLOTS_PER_SLAB)]!, (slot % SLOTS_PER_SLAB) * SLOT_BYTES];
  }
}
