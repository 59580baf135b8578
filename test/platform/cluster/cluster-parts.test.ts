// The pure parts of cluster/: shard hashing and rendezvous, peer addresses and frames, and the
// errors that cross workers. Fast and in-process, so the mutation run (vitest.stryker.config.ts)
// can run them for every mutant.
import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import {
  SHARD_COUNT,
  fnv1a,
  leaseName,
  rendezvous,
  score,
  shardOf,
} from '../../../src/platform/cluster/shard-leases.js';
import { FrameReader, formatAddress, parseAddress } from '../../../src/platform/cluster/peer-transport.js';
import { NotOwner, decodeError, encodeError } from '../../../src/platform/cluster/wire-errors.js';
import { AppError, ValidationError } from '../../../src/errors.js';

describe('shard hashing', () => {
  it('is 32-bit FNV-1a (published test vectors)', () => {
    expect(fnv1a('')).toBe(0x811c9dc5);
    expect(fnv1a('a')).toBe(0xe40c292c);
    expect(fnv1a('foobar')).toBe(0xbf9cf968);
  });

  it('puts an id on one of SHARD_COUNT shards, by its hash', () => {
    expect(SHARD_COUNT).toBe(1024);
    for (const id of ['', 'a', 'foobar', 'a-session-nonce']) expect(shardOf(id)).toBe(fnv1a(id) % 1024);
    expect(leaseName(17)).toBe('shard:17');
  });

  it('gives a shard to the member with the highest SHA-256 score, whatever the order of the list', () => {
    const members = ['w1', 'w2', 'w3', 'w4'];
    expect(rendezvous(3, [])).toBeUndefined();
    expect(rendezvous(3, ['only'])).toBe('only');
    expect(score('w1', 3)).toBe(createHash('sha256').update('w1#3').digest().readUIntBE(0, 6));
    let top = 0;
    for (let shard = 0; shard < SHARD_COUNT; shard++) {
      const best = [...members].sort((x, y) => score(y, shard) - score(x, shard))[0];
      const owner = rendezvous(shard, members);
      expect(rendezvous(shard, [...members].reverse())).toBe(owner);
      if (owner === best) top++;
    }
    // The load cap sends only a few shards past their top choice.
    expect(top).toBeGreaterThan(SHARD_COUNT * 0.9);
  });

  it('balances 2 to 16 members within 1.1x of the fair share at p90 (busiest member), with few moves', () => {
    let seed = 1;
    const id = () => `w-${(seed = (seed * 48271) % 2147483647).toString(36)}-${seed % 9973}`;
    for (let n = 2; n <= 16; n++) {
      const ratios: number[] = [];
      for (let trial = 0; trial < 5; trial++) {
        const members = Array.from({ length: n }, id);
        const counts = new Map<string, number>();
        for (let s = 0; s < SHARD_COUNT; s++) {
          const o = rendezvous(s, members)!;
          counts.set(o, (counts.get(o) ?? 0) + 1);
        }
        ratios.push(Math.max(...counts.values()) / (SHARD_COUNT / n));
        // One member leaves: the others keep most of their shards.
        const before = Array.from({ length: SHARD_COUNT }, (_, s) => rendezvous(s, members));
        const rest = members.slice(1);
        const after = Array.from({ length: SHARD_COUNT }, (_, s) => rendezvous(s, rest));
        let moved = 0;
        for (let s = 0; s < SHARD_COUNT; s++) if (before[s] !== members[0] && after[s] !== before[s]) moved++;
        expect(moved, `n=${n}`).toBeLessThan(SHARD_COUNT * 0.1);
      }
      ratios.sort((a, b) => a - b);
      expect(ratios[ratios.length - 1], `n=${n}`).toBeLessThanOrEqual(1.1); // every trial, so p90 too
    }
  });
});

describe('peer addresses', () => {
  it('format IPv6 hosts in brackets', () => {
    expect(formatAddress('127.0.0.1', 7000)).toBe('127.0.0.1:7000');
    expect(formatAddress('::1', 7000)).toBe('[::1]:7000');
    expect(formatAddress('node-a.internal', 1)).toBe('node-a.internal:1');
  });

  it('parse back, and anything else is no address', () => {
    expect(parseAddress('127.0.0.1:7000')).toEqual({ host: '127.0.0.1', port: 7000 });
    expect(parseAddress('[::1]:7000')).toEqual({ host: '::1', port: 7000 });
    expect(parseAddress('[fe80::1:2]:65535')).toEqual({ host: 'fe80::1:2', port: 65535 });
    expect(parseAddress('h:1')).toEqual({ host: 'h', port: 1 });
    for (const bad of ['', 'nohost', ':7000', 'h:', 'h:0', 'h:65536', 'h:-1', 'h:1.5', 'h:x', '[]:7000'])
      expect(parseAddress(bad), bad).toBeUndefined();
  });
});

const framed = (payload: Buffer) => {
  const head = Buffer.alloc(4);
  head.writeUInt32BE(payload.length);
  return Buffer.concat([head, payload]);
};

describe('peer frames', () => {
  it('are cut out of a stream however it is chunked', () => {
    const payloads = [Buffer.from('one'), Buffer.alloc(0), Buffer.alloc(300, 7), Buffer.from('last')];
    const stream = Buffer.concat(payloads.map(framed));
    for (const size of [1, 2, 3, 5, 64, stream.length]) {
      const reader = new FrameReader(1024);
      const out: Buffer[] = [];
      for (let i = 0; i < stream.length; i += size) out.push(...reader.push(stream.subarray(i, i + size)));
      expect(out).toEqual(payloads);
    }
  });

  it('keep a partial frame until the rest arrives, and what follows it', () => {
    const reader = new FrameReader(1024);
    const one = framed(Buffer.from('first'));
    const two = framed(Buffer.from('second'));
    expect(reader.push(one.subarray(0, 6))).toEqual([]);
    expect(reader.push(Buffer.concat([one.subarray(6), two.subarray(0, 5)]))).toEqual([Buffer.from('first')]);
    expect(reader.push(two.subarray(5))).toEqual([Buffer.from('second')]);
    expect(reader.push(Buffer.alloc(0))).toEqual([]);
  });

  it('refuse a frame over the cap as soon as its length is read; the cap can be raised', () => {
    const reader = new FrameReader(512);
    expect(reader.push(framed(Buffer.alloc(512)))).toHaveLength(1);
    const head = Buffer.alloc(4);
    head.writeUInt32BE(513);
    expect(() => reader.push(head)).toThrow(/frame of 513 bytes over the 512 byte cap/);
    const raised = new FrameReader(512);
    raised.limit = 1024;
    expect(raised.push(framed(Buffer.alloc(1000)))).toHaveLength(1);
  });
});

describe('errors across workers', () => {
  const roundTrip = (err: unknown) => decodeError(encodeError(err));

  it('a coded error arrives with its code, detail and headers', () => {
    const err = roundTrip(new AppError('app_disabled', 'Down until 10:00', { 'Retry-After': '7' }));
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({ code: 'app_disabled', detail: 'Down until 10:00', headers: { 'Retry-After': '7' } });
  });

  it('a validation error arrives with its issues', () => {
    const issues = [{ loc: ['body', 'hwid'], msg: 'too short', type: 'string_too_short' }];
    const err = roundTrip(new ValidationError(issues));
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues).toEqual(issues);
  });

  it('NotOwner arrives as NotOwner of the same shard', () => {
    const err = roundTrip(new NotOwner(42));
    expect(err).toBeInstanceOf(NotOwner);
    expect((err as NotOwner).shard).toBe(42);
    expect(err.message).toBe('not the owner of shard 42');
  });

  it('anything else arrives as a plain error with its name and message', () => {
    const type = roundTrip(new TypeError('bad thing'));
    expect(type).not.toBeInstanceOf(AppError);
    expect([type.name, type.message]).toEqual(['TypeError', 'bad thing']);
    const thrown = roundTrip('a string');
    expect([thrown.name, thrown.message]).toEqual(['Error', 'a string']);
  });

  it('a code this build does not know is a plain error, not a crash', () => {
    const err = decodeError({ kind: 'coded', code: 'from_the_future' as never, detail: 'x', headers: {} });
    expect(err).not.toBeInstanceOf(AppError);
    expect(err.message).toBe('unknown error code from_the_future');
  });
});

describe('peer addresses, brackets', () => {
  it('strip only brackets around the whole host', () => {
    expect(parseAddress('h[1]:80')).toEqual({ host: 'h[1]', port: 80 });
    expect(parseAddress('[a]b:80')).toEqual({ host: '[a]b', port: 80 });
  });
});
