// A call forwarded to a slow (CPU-starved) owner is sent once and awaited while that owner holds the
// shard; past the deadline the caller gets 503, never a 500. (Sending it again after 3 s, while the
// first copy still waited in the owner's queue, answered a client with the first copy's effect.)
// Two real cluster nodes share one coordinator here; the owner's handler is slow on purpose.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { LocalCoordinator } from '../../../src/platform/cluster/local.coordinator.js';
import { ClusterNode, SHARD_COUNT } from '../../../src/platform/cluster/cluster-node.js';
import { AppError, ValidationError } from '../../../src/errors.js';

const log = pino({ level: 'silent' });
let coordinator: LocalCoordinator;
let a: ClusterNode;
let b: ClusterNode;

beforeAll(async () => {
  coordinator = new LocalCoordinator();
  a = new ClusterNode(coordinator, log, Date.now);
  b = new ClusterNode(coordinator, log, Date.now);
  await a.start();
  await b.start();
  // Both see each other after a round; then each holds its rendezvous share of the shards.
  await a.tick();
  await b.tick();
  await a.tick();
});
afterAll(async () => {
  await a?.close();
  await b?.close();
  await coordinator?.close();
});

function shardOwnedBy(node: ClusterNode): number {
  for (let s = 0; s < SHARD_COUNT; s++) if (node.fenceOf(s) !== undefined) return s;
  throw new Error('node owns no shard');
}

describe('forwarding to a slow owner', () => {
  it('waits for the one copy it sent instead of sending it again, and returns its answer', async () => {
    expect(a.memberCount).toBe(2);
    const shard = shardOwnedBy(b);
    expect(a.fenceOf(shard)).toBeUndefined();
    let runs = 0;
    b.handle('slow.op', async (args) => {
      runs++;
      await new Promise((r) => setTimeout(r, 4_500)); // longer than the old 3 s call timeout
      return { echoed: args, run: runs };
    });
    const result = await a.route(shard, 'slow.op', { n: 7 }, async () => {
      throw new Error('must run on the owner');
    });
    expect(result).toEqual({ echoed: { n: 7 }, run: 1 });
    expect(runs).toBe(1);
  }, 20_000);

  it('an error coded on the owner arrives as the same coded error, with its detail and headers', async () => {
    const shard = shardOwnedBy(b);
    b.handle('coded.op', async () => {
      throw new AppError('app_disabled', 'Down for maintenance until 10:00', { 'Retry-After': '7' });
    });
    const err = await a.route(shard, 'coded.op', {}, async () => 'local').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({
      code: 'app_disabled',
      status: 403,
      detail: 'Down for maintenance until 10:00',
      headers: { 'Retry-After': '7' },
    });
    b.handle('invalid.op', async () => {
      throw new ValidationError([{ loc: ['body', 'hwid'], msg: 'too short', type: 'string_too_short' }]);
    });
    const invalid = await a.route(shard, 'invalid.op', {}, async () => 'local').catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(ValidationError);
    expect((invalid as ValidationError).issues).toEqual([
      { loc: ['body', 'hwid'], msg: 'too short', type: 'string_too_short' },
    ]);
  });
});
