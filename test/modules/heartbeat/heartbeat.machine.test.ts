import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pack, unpack } from 'msgpackr';
import {
  UnknownSnapshotVersion,
  decodeHeartbeat,
  encodeHeartbeat,
} from '../../../src/modules/heartbeat/heartbeat-codec.js';
import { createActor } from 'xstate';
import {
  HEARTBEAT_SNAPSHOT_VERSION,
  expiryWindowMs,
  heartbeatMachine,
  hwidHash,
  judgeBeat,
  type BeatInput,
  type HeartbeatContext,
} from '../../../src/modules/heartbeat/heartbeat.machine.js';
import { HeartbeatHost } from '../../../src/modules/heartbeat/heartbeat-host.js';

const T0 = 1_000_000;
const TOKEN = 'TT' + 'a'.repeat(32);
const input = {
  appId: 'app',
  session: 'sess',
  token: TOKEN,
  systemId: 'sys-0001',
  beatInterval: 10,
  now: T0,
  userId: null,
  licenseId: null,
  hwidHash: null,
};

function beat(over: Partial<BeatInput> = {}): BeatInput {
  return {
    now: T0 + 1000,
    token: TOKEN,
    systemId: 'sys-0001',
    beatIndex: 1,
    codeHash: 'abcdef12',
    pinnedHash: '',
    injectionDetection: true,
    newToken: 'TT' + 'b'.repeat(32),
    ...over,
  };
}

function ctx(over: Partial<HeartbeatContext> = {}): HeartbeatContext {
  const a = createActor(heartbeatMachine, { input }).start();
  return { ...a.getSnapshot().context, ...over };
}

describe('judgeBeat: the order of checks is the policy', () => {
  it.each([
    [
      'wrong token first, even with every other fault',
      beat({ token: 'TT' + 'c'.repeat(32), systemId: 'x', debuggerDetected: true }),
      'rejected',
    ],
    ['malformed token', beat({ token: 'tt' + 'a'.repeat(32) }), 'rejected'],
    ['replay before kills', beat({ beatIndex: 0, systemId: 'x' }), 'rejected'],
    ['system_id', beat({ systemId: 'other' }), 'killed'],
    ['debugger with injection detection', beat({ debuggerDetected: true }), 'killed'],
    ['debugger without injection detection', beat({ debuggerDetected: true, injectionDetection: false }), 'accepted'],
    ['no hash on the first beat, unpinned', beat({ codeHash: undefined }), 'killed'],
    ['no hash on the first beat, pinned', beat({ codeHash: undefined, pinnedHash: 'abcdef12' }), 'accepted'],
    ['hash differs from the pin', beat({ pinnedHash: '12345678' }), 'killed'],
  ])('%s', (_n, b, kind) => {
    expect(judgeBeat(ctx(), b).kind).toBe(kind);
  });

  // Two faults at once: the verdict names the one checked first, so moving a check changes it.
  const later = { beatCount: 1, codeHash: 'abcdef12', codeSize: 100, lastBeatIndex: 1 };
  it.each<[string, Partial<HeartbeatContext>, Partial<BeatInput>, string]>([
    ['token before replay', {}, { token: 'TT' + 'c'.repeat(32), beatIndex: 0 }, 'token'],
    ['replay before system_id', {}, { beatIndex: 0, systemId: 'other' }, 'replay'],
    ['system_id before the debugger', {}, { systemId: 'other', debuggerDetected: true }, 'system_id'],
    [
      'system_id before a changed code hash',
      later,
      { beatIndex: 2, systemId: 'other', codeHash: 'ffffffff' },
      'system_id',
    ],
    [
      'the debugger before a hash that differs from the pin',
      {},
      { debuggerDetected: true, pinnedHash: '12345678' },
      'debugger',
    ],
    ['the debugger before no hash on the first beat', {}, { debuggerDetected: true, codeHash: undefined }, 'debugger'],
    [
      'no hash on the first beat before the third drift warning',
      { warnings: 2 },
      { codeHash: undefined, now: T0 + 30_000 },
      'no_code_hash',
    ],
    [
      'a hash that differs from the pin before the third drift warning',
      { warnings: 2 },
      { pinnedHash: '12345678', now: T0 + 30_000 },
      'pinned_hash',
    ],
    [
      'a changed code hash before the third drift warning',
      { ...later, warnings: 2 },
      { beatIndex: 2, codeHash: 'ffffffff', now: T0 + 30_000 },
      'code_changed',
    ],
  ])('%s', (_n, c, b, reason) => {
    expect(judgeBeat(ctx(c), beat(b))).toMatchObject({ reason });
  });

  // After the first beat the baseline holds: the same hash (in any case) and size pass; a change in
  // either kills; a beat that reports neither is judged on the rest.
  it.each<[string, Partial<BeatInput>, string]>([
    ['the same hash and size', { codeHash: 'abcdef12', codeSize: 100 }, 'accepted'],
    ['the same hash in capitals', { codeHash: 'ABCDEF12', codeSize: 100 }, 'accepted'],
    ['neither hash nor size', { codeHash: undefined }, 'accepted'],
    ['the same hash, another size', { codeHash: 'abcdef12', codeSize: 101 }, 'code_changed'],
    ['a size only, another one', { codeHash: undefined, codeSize: 99 }, 'code_changed'],
    ['another hash only', { codeHash: 'ffffffff' }, 'code_changed'],
  ])('a later beat with %s', (_n, b, verdict) => {
    const v = judgeBeat(ctx(later), beat({ beatIndex: 2, ...b }));
    expect(v.kind === 'accepted' ? 'accepted' : (v as { reason: string }).reason).toBe(verdict);
  });

  it('a later beat with a size but no baseline size, or a hash but no baseline hash, is accepted', () => {
    expect(judgeBeat(ctx({ ...later, codeSize: null }), beat({ beatIndex: 2, codeSize: 7 })).kind).toBe('accepted');
    expect(judgeBeat(ctx({ ...later, codeHash: null }), beat({ beatIndex: 2, codeHash: 'ffffffff' })).kind).toBe(
      'accepted',
    );
  });

  it('a session expires six intervals after its start or last accepted beat, at least a minute', () => {
    expect([expiryWindowMs(5), expiryWindowMs(10), expiryWindowMs(20)]).toEqual([60_000, 60_000, 120_000]);
    const a = createActor(heartbeatMachine, { input: { ...input, beatInterval: 20 } }).start();
    expect(a.getSnapshot().context.expiresAt).toBe(T0 + 120_000);
    a.send({ type: 'BEAT', beat: beat({ now: T0 + 5000 }) });
    expect(a.getSnapshot().context.expiresAt).toBe(T0 + 5000 + 120_000);
  });

  it("the first beat's hash becomes the baseline whatever its case", () => {
    const a = createActor(heartbeatMachine, { input }).start();
    a.send({ type: 'BEAT', beat: beat({ codeHash: 'ABCDEF12' }) });
    a.send({ type: 'BEAT', beat: beat({ token: 'TT' + 'b'.repeat(32), beatIndex: 2, codeHash: 'abcdef12' }) });
    expect(a.getSnapshot().context).toMatchObject({ beatCount: 2, codeHash: 'abcdef12' });
  });

  it('a pinned hash compares without case', () => {
    expect(judgeBeat(ctx(), beat({ codeHash: 'ABCDEF12', pinnedHash: 'abcdef12' })).kind).toBe('accepted');
    expect(judgeBeat(ctx(), beat({ codeHash: 'abcdef12', pinnedHash: 'ABCDEF12' })).kind).toBe('accepted');
  });

  it('drift: more than 2.5 intervals since the previous beat warns; the third warning kills; clean beats decay', () => {
    expect(judgeBeat(ctx(), beat({ now: T0 + 25_000 }))).toMatchObject({ kind: 'accepted', warnings: 0 });
    expect(judgeBeat(ctx(), beat({ now: T0 + 25_001 }))).toMatchObject({ kind: 'accepted', drift: true, warnings: 1 });
    expect(judgeBeat(ctx({ warnings: 2 }), beat({ now: T0 + 1000 }))).toMatchObject({ kind: 'accepted', warnings: 1 });
    expect(judgeBeat(ctx({ warnings: 2 }), beat({ now: T0 + 30_000 }))).toEqual({ kind: 'killed', reason: 'drift' });
  });
});

describe('heartbeat machine', () => {
  it('crosses a process boundary through the versioned codec and goes on judging with the restored baseline', () => {
    // The production path: a host's context -> encodeHeartbeat (Redis) -> decodeHeartbeat -> another host's restore.
    const a = new HeartbeatHost({ now: () => T0 });
    a.create(input);
    a.send(input.session, { type: 'BEAT', beat: beat({ codeSize: 42 }) });
    const before = a.peek(input.session)!;
    const decoded = decodeHeartbeat(encodeHeartbeat(before));
    expect(decoded).toEqual({ ...before, last: null });
    expect(decoded.v).toBe(HEARTBEAT_SNAPSHOT_VERSION);
    const b = new HeartbeatHost({ now: () => T0 });
    b.restore(decoded);
    const tampered = b.send(input.session, {
      type: 'BEAT',
      beat: beat({ token: 'TT' + 'b'.repeat(32), beatIndex: 2, codeSize: 43, now: T0 + 2000 }),
    });
    expect(tampered?.verdict).toEqual({ kind: 'killed', reason: 'code_changed' });
    a.close();
    b.close();
  });

  it('keeps the device hash through the codec; a version 1 snapshot (no device) decodes with hwidHash null', () => {
    const host = new HeartbeatHost({ now: () => T0 });
    host.create({ ...input, hwidHash: hwidHash('PC-Office-0001') });
    const c = host.peek(input.session)!;
    expect(c.hwidHash).toBe(hwidHash('pc-office-0001'));
    expect(c.hwidHash).toMatch(/^[0-9a-f]{16}$/);
    expect(decodeHeartbeat(encodeHeartbeat(c))).toEqual({ ...c, last: null });
    host.close();
    // What a worker of the previous build wrote to Redis or the checkpoint: the 16-field tuple of version 1.
    const v1 = pack([
      1,
      'app',
      'sess',
      TOKEN,
      'sys-0001',
      10,
      3,
      3,
      1,
      T0 + 30_000,
      T0,
      T0 + 90_000,
      'abcdef12',
      42,
      null,
      null,
    ]);
    const old = decodeHeartbeat(v1);
    expect(old).toEqual({
      v: HEARTBEAT_SNAPSHOT_VERSION,
      appId: 'app',
      session: 'sess',
      token: TOKEN,
      systemId: 'sys-0001',
      beatInterval: 10,
      lastBeatIndex: 3,
      beatCount: 3,
      warnings: 1,
      lastBeatAt: T0 + 30_000,
      startedAt: T0,
      expiresAt: T0 + 90_000,
      codeHash: 'abcdef12',
      codeSize: 42,
      userId: null,
      licenseId: null,
      hwidHash: null,
      last: null,
    });
    // It goes on being judged, and is written back as the current version.
    const b = new HeartbeatHost({ now: () => T0 });
    b.restore(old);
    const next = b.send('sess', {
      type: 'BEAT',
      beat: beat({ beatIndex: 4, codeSize: 42, now: T0 + 31_000, newToken: 'TT' + 'c'.repeat(32) }),
    });
    expect(next?.verdict).toEqual({ kind: 'accepted', drift: false });
    expect(decodeHeartbeat(encodeHeartbeat(next!.context!)).hwidHash).toBeNull();
    expect((unpack(encodeHeartbeat(next!.context!)) as unknown[]).length).toBe(17);
    b.close();
    // A version 1 tuple of the wrong length is still refused.
    expect(() => decodeHeartbeat(pack([1, 'app']))).toThrow(UnknownSnapshotVersion);
  });

  it('refuses a snapshot of a version it does not know', () => {
    expect(() => decodeHeartbeat(pack([HEARTBEAT_SNAPSHOT_VERSION + 1, 'app']))).toThrow(UnknownSnapshotVersion);
    expect(() => decodeHeartbeat(pack({ v: 1, token: 'x' }))).toThrow(UnknownSnapshotVersion);
  });

  it('stop with the right token closes; with a wrong one stays alive', () => {
    const a = createActor(heartbeatMachine, { input }).start();
    a.send({ type: 'STOP', token: 'TT' + 'f'.repeat(32) });
    expect(a.getSnapshot().value).toBe('alive');
    a.send({ type: 'STOP', token: TOKEN });
    expect(a.getSnapshot().value).toBe('closed');
  });
});

describe('heartbeat host', () => {
  it('caps live actors, passivates the least recently used and wakes them on their next event', () => {
    let now = T0;
    const host = new HeartbeatHost({ now: () => now, maxLive: 2 });
    for (const s of ['s1', 's2', 's3']) host.create({ ...input, session: s });
    expect(host.size).toBe(3);
    expect(host.unpacked).toBe(2);
    const r = host.send('s1', { type: 'BEAT', beat: beat() });
    expect(r?.verdict.kind).toBe('accepted');
    expect(host.unpacked).toBe(2);
    expect(host.peek('s1')?.beatCount).toBe(1);
    now += 61_000;
    expect(host.sweep()).toBe(3);
    expect(host.size).toBe(0);
    host.close();
  });
});

describe('the host against the machine', () => {
  // The host applies an accepted beat without the interpreter (acceptedBeat) and runs the machine
  // for everything else, packing and unpacking sessions on the way; a plain XState actor is the
  // reference. Any event sequence must leave both with the same verdicts and the same context.
  const hex32 = (n: number) => 'TT' + n.toString(16).padStart(32, '0');
  type Step =
    | {
        type: 'BEAT';
        token: 'current' | 'stale' | 'junk';
        index: number;
        dt: number;
        system: boolean;
        code: number;
        size: number;
        debug: boolean;
        pinned: boolean;
      }
    | { type: 'STOP'; right: boolean }
    | { type: 'KILL' };
  const step: fc.Arbitrary<Step> = fc.oneof(
    {
      weight: 8,
      arbitrary: fc.record({
        type: fc.constant('BEAT' as const),
        token: fc.constantFrom(
          'current' as const,
          'current' as const,
          'current' as const,
          'stale' as const,
          'junk' as const,
        ),
        index: fc.integer({ min: -1, max: 2 }),
        dt: fc.constantFrom(1_000, 10_000, 24_000, 26_000, 40_000),
        system: fc.boolean(),
        code: fc.constantFrom(0, 0, 0, 1, 2),
        size: fc.constantFrom(0, 0, 0, 1, -1),
        debug: fc.constantFrom(false, false, false, true),
        pinned: fc.constantFrom(false, false, false, true),
      }),
    },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('STOP' as const), right: fc.boolean() }) },
    { weight: 1, arbitrary: fc.record({ type: fc.constant('KILL' as const) }) },
  );

  it('gives the verdicts and contexts of a plain actor for any sequence of events', () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 40 }), fc.boolean(), (steps, packed) => {
        let now = T0;
        const host = new HeartbeatHost({ now: () => now, maxLive: 1 });
        const reference = createActor(heartbeatMachine, { input }).start();
        host.create(input);
        let issued = 1;
        for (const s of steps) {
          // Another session passes through, so the session under test is packed and woken.
          if (packed) host.create({ ...input, session: `other-${issued}` });
          const c = reference.getSnapshot().context;
          let event: Parameters<typeof host.send>[1];
          if (s.type === 'BEAT') {
            now += s.dt;
            event = {
              type: 'BEAT',
              beat: {
                now,
                token: s.token === 'current' ? c.token : s.token === 'stale' ? hex32(issued + 1_000) : 'TTxyz',
                systemId: s.system ? input.systemId : 'other-system',
                beatIndex: c.lastBeatIndex + s.index,
                ...(s.code === 0 ? { codeHash: 'ABCDEF12' } : s.code === 1 ? { codeHash: 'ffff0000' } : {}),
                ...(s.size === 0 ? { codeSize: 4096 } : s.size === 1 ? { codeSize: 8192 } : {}),
                debuggerDetected: s.debug,
                pinnedHash: s.pinned ? 'abcdef12' : '',
                injectionDetection: true,
                newToken: hex32(++issued),
              },
            };
          } else if (s.type === 'STOP') event = { type: 'STOP', token: s.right ? c.token : hex32(999_999) };
          else event = { type: 'KILL', reason: 'revoked' };
          const got = host.send(input.session, event);
          reference.send(event);
          const want = reference.getSnapshot();
          expect(got?.verdict).toEqual(want.context.last);
          expect(got?.before).toEqual(c);
          if (want.status === 'done') {
            expect(got?.context).toBeNull();
            expect(host.has(input.session)).toBe(false);
            break;
          }
          expect(got?.context).toEqual(want.context);
          expect(host.peek(input.session)).toEqual(want.context);
        }
        host.close();
      }),
      { numRuns: 300 },
    );
  });
});
