import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import {
  HEARTBEAT_SNAPSHOT_VERSION, heartbeatMachine, judgeBeat, type BeatInput, type HeartbeatContext,
} from '../../src/actors/heartbeat.machine.js';
import { HeartbeatHost } from '../../src/actors/heartbeat-host.js';

const T0 = 1_000_000;
const TOKEN = 'TT' + 'a'.repeat(32);
const input = { appId: 'app', session: 'sess', token: TOKEN, systemId: 'sys-0001', beatInterval: 10, now: T0, userId: null, licenseId: null };

function beat(over: Partial<BeatInput> = {}): BeatInput {
  return { now: T0 + 1000, token: TOKEN, systemId: 'sys-0001', beatIndex: 1, codeHash: 'abcdef12', pinnedHash: '', injectionDetection: true, newToken: 'TT' + 'b'.repeat(32), ...over };
}

function ctx(over: Partial<HeartbeatContext> = {}): HeartbeatContext {
  const a = createActor(heartbeatMachine, { input }).start();
  return { ...a.getSnapshot().context, ...over };
}

describe('judgeBeat: the order of checks is the policy', () => {
  it.each([
    ['wrong token first, even with every other fault', beat({ token: 'TT' + 'c'.repeat(32), systemId: 'x', debuggerDetected: true }), 'rejected'],
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
  it('persists, encodes and rehydrates mid-session (versioned snapshot)', () => {
    const a = createActor(heartbeatMachine, { input }).start();
    a.send({ type: 'BEAT', beat: beat({ codeSize: 42 }) });
    const persisted = JSON.parse(JSON.stringify(a.getPersistedSnapshot()));
    expect(persisted.context.v).toBe(HEARTBEAT_SNAPSHOT_VERSION);
    const b = createActor(heartbeatMachine, { snapshot: persisted, input }).start();
    expect(b.getSnapshot().context).toMatchObject({ token: 'TT' + 'b'.repeat(32), lastBeatIndex: 1, beatCount: 1, codeSize: 42, codeHash: 'abcdef12' });
    b.send({ type: 'BEAT', beat: beat({ token: 'TT' + 'b'.repeat(32), beatIndex: 2, codeSize: 43, now: T0 + 2000 }) });
    expect(b.getSnapshot().value).toBe('killed');
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
