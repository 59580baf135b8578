import type { Clock } from '../../src/clock.js';

/** A clock tests move by hand; it starts at the real time so signatures stay fresh. */
export class TestClock implements Clock {
  private offset = 0;
  now(): number {
    return Date.now() + this.offset;
  }
  advance(ms: number): void {
    this.offset += ms;
  }
}
