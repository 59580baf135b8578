// The Redis commands a piece of code sends, read through MONITOR: for tests that pin how many round
// trips or script calls something takes.
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/**
 * Runs `fn` and returns the commands Redis ran on keys under `prefix` meanwhile (not those inside
 * scripts). MONITOR is ordered, so everything between a start and an end marker, read through
 * `client` (the connection `fn` uses), is `fn`'s.
 */
export async function commandsOf(
  monitor: Redis,
  client: Redis,
  prefix: string,
  fn: () => Promise<void>,
): Promise<string[][]> {
  const seen: string[][] = [];
  const marker = `${prefix}marker:${randomBytes(4).toString('hex')}`;
  let recording = false;
  let started!: () => void;
  let ended!: () => void;
  const start = new Promise<void>((r) => (started = r));
  const end = new Promise<void>((r) => (ended = r));
  const listener = (_time: string, args: string[], source: string) => {
    if (args[1] === `${marker}:start`) {
      recording = true;
      return started();
    }
    if (args[1] === `${marker}:end`) return ended();
    // includes, not startsWith: a batch script's keys travel inside its one packed argument.
    if (recording && source !== 'lua' && args.some((a) => a.includes(prefix))) seen.push(args);
  };
  monitor.on('monitor', listener);
  try {
    await client.get(`${marker}:start`);
    await start;
    await fn();
    await client.get(`${marker}:end`);
    await end;
  } finally {
    monitor.off('monitor', listener);
  }
  return seen;
}
