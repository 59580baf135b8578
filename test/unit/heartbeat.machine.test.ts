import { describe, expect, it } from 'vitest';
import { pack } from 'msgpackr';
import {
  UnknownSnapshotVersion,
  decodeHeartbeat,
  encodeHeartbeat,
} from '../../src/modules/heartbeat/heartbeat-codec.js';
import { createActor } from 'xstate';
import {
  HEARTBEAT_SNAPSHOT_VERSION,
  heartbeatMachine,
  judgeBeat,
  type BeatInput,
  type HeartbeatContext,
} from '../../src/modules/heartbeat/heartbeat.machine.js';
import { HeartbeatHost } from '../../src/modules/heartbeat/heartbeat-host.js';

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
    expect(host.liveActors).toBe(2);
    const r = host.send('s1', { type: 'BEAT', beat: beat() });
    expect(r?.verdict.kind).toBe('accepted');
    expect(host.liveActors).toBe(2);
    expect(host.peek('s1')?.beatCount).toBe(1);
    now += 61_000;
    expect(host.sweep()).toBe(3);
    expect(host.size).toBe(0);
    host.close();
  });
});
