/** Time source; tests of drift and expiry pass a controllable one. Milliseconds since the epoch. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export function iso(ms: number | Date): string {
  return (typeof ms === 'number' ? new Date(ms) : ms).toISOString();
}
