// Passivated heartbeat contexts are packed (src/modules/heartbeat/heartbeat-passive.ts): whatever
// goes in must come out exactly, expiry must still find them, and a released shard must drop
// exactly its own.
import { describe, expect, it } from 'vitest';
import { PassiveContexts } from '../../../src/modules/heartbeat/heartbeat-passive.js';
import { HeartbeatHost } from '../../../src/modules/heartbeat/heartbeat-host.js';
import {
  HEARTBEAT_SNAPSHOT_VERSION,
  type BeatInput,
  type BeatVerdict,
  type HeartbeatContext,
  hwidHash,
} from '../../../src/modules/heartbeat/heartbeat.machine.js';

const T0 = 1_760_000_000_000;
const hex = (n: number, len: number) => n.toString(16).padStart(len, '0').slice(-len);
const uuid = (n: number) => `${hex(n, 8)}-${hex(n * 3, 4)}-4${hex(n, 3)}-8${hex(n * 7, 3)}-${hex(n * 7919, 12)}`;
const token = (n: number) => `TT${hex(n, 8)}0123456789abcdef${hex(n * 31, 8)}`;

function context(n: number, over: Partial<HeartbeatContext> = {}): HeartbeatContext {
  return {
    v: HEARTBEAT_SNAPSHOT_VERSION,
    appId: `app-${n % 3}`,
    session: `session-${n}`,
    token: token(n),
    systemId: `system-${n}`,
    beatInterval: 30,
    lastBeatIndex: n,
    beatCount: n * 2,
    warnings: n % 3,
    lastBeatAt: T0 + n,
    startedAt: T0 - n,
    expiresAt: T0 + 60_000 + n,
    codeHash: n % 2 ? 'abcdef0123456789' : null,
    codeSize: n % 2 ? 4096 + n : null,
    userId: n % 4 ? uuid(n) : null,
    licenseId: uuid(n + 1_000),
    hwidHash: n % 5 ? hwidHash(`device-${n}`) : null,
    last: null,
    ...over,
  };
}

describe('packed passivated contexts', () => {
  it('give back every field exactly, for every shape a context can have', () => {
    const verdicts: (BeatVerdict | null)[] = [
      null,
      { kind: 'accepted', drift: false },
      { kind: 'accepted', drift: true },
      { kind: 'rejected', reason: 'token' },
      { kind: 'rejected', reason: 'replay' },
      { kind: 'stop_refused' },
    ];
    const cases: HeartbeatContext[] = [
      ...verdicts.map((last, i) => context(i, { last })),
      context(10, { codeSize: 0, warnings: 0, beatCount: 0, lastBeatIndex: 0 }),
      context(11, { codeSize: Number.MAX_SAFE_INTEGER, lastBeatIndex: 2 ** 31, beatCount: 2 ** 40 }),
      context(12, { codeHash: 'A'.repeat(128), systemId: 'ünïcødé system ✓', appId: 'app' }),
      context(13, { userId: null, licenseId: null, codeHash: null, codeSize: null, hwidHash: null }),
      context(15, { hwidHash: '00ff00ff00ff00ff' }),
      context(14, { lastBeatIndex: -0, expiresAt: Number.MAX_VALUE }),
      // Not the usual shapes: kept as they are, and still exact.
      context(20, { licenseId: 'license-1' }),
      context(21, { userId: uuid(21).toUpperCase() }),
      context(22, { token: `TT${token(22).slice(2).toUpperCase()}` }),
      context(23, { token: 'TT' + 'a'.repeat(31) }),
      context(24, { v: HEARTBEAT_SNAPSHOT_VERSION + 1 }),
      context(25, { beatInterval: 2.5 }),
      context(26, { warnings: -1 }),
      context(27, { last: { kind: 'accepted', drift: false, warnings: 1 } as BeatVerdict }),
      context(28, { hwidHash: 'ABCDEF0123456789' }),
      context(29, { hwidHash: 'raw-hwid-not-a-hash' }),
    ];
    const p = new PassiveContexts();
    for (const c of cases) p.put(c, 7);
    expect(p.size).toBe(cases.length);
    expect(p.unpacked).toBe(10); // the last ten

    for (const c of cases) {
      expect(p.get(c.session)).toStrictEqual(c);
      expect(p.expiresAt(c.session)).toBe(c.expiresAt);
    }
    expect(Object.is(p.get('session-14')!.lastBeatIndex, -0)).toBe(true);
    // Deleted, it is gone.
    expect(p.delete('session-3')).toBe(true);
    expect(p.get('session-3')).toBeUndefined();
    expect(p.has('session-3')).toBe(false);
    expect(p.size).toBe(cases.length - 1);
  });

  it('keeps a shared code hash and appId while any session still uses it', () => {
    const p = new PassiveContexts();
    p.put(context(1, { codeHash: 'feedface00', appId: 'a' }), 0);
    p.put(context(3, { codeHash: 'feedface00', appId: 'a' }), 0);
    p.delete('session-1');
    p.put(context(5, { codeHash: 'other-hash', appId: 'b' }), 0);
    expect(p.get('session-3')).toMatchObject({ codeHash: 'feedface00', appId: 'a' });
    expect(p.get('session-5')).toMatchObject({ codeHash: 'other-hash', appId: 'b' });
    expect(p.countWhere('appId', 'a')).toBe(1);
    expect(p.interned).toBe(4);
    p.delete('session-3');
    p.delete('session-5');
    expect(p.interned).toBe(0);
  });

  it('matches the reference model through a long random sequence of puts, removals, sweeps and shard drops', () => {
    let seed = 42;
    const rnd = (n: number) => {
      // mulberry32: a seeded generator, so a failure replays
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return ((t ^ (t >>> 14)) >>> 0) % n;
    };
    const p = new PassiveContexts();
    const model = new Map<string, { c: HeartbeatContext; group: number }>();
    let now = T0;
    let biggest = 0;
    for (let step = 0; step < 40_000; step++) {
      // Phases that fill (mostly puts) and drain (mostly removals), so the slots grow and shrink.
      const filling = Math.floor(step / 8_000) % 2 === 0;
      const r = rnd(100);
      const op = filling
        ? r < 80
          ? 'put'
          : r < 85
            ? 'delete'
            : r < 90
              ? 'take'
              : r < 95
                ? 'sweep'
                : 'find'
        : r < 20
          ? 'put'
          : r < 40
            ? 'delete'
            : r < 60
              ? 'take'
              : r < 80
                ? 'sweep'
                : r < 85
                  ? 'drop'
                  : 'find';
      const n = rnd(10_000);
      const session = `session-${n}`;
      if (op === 'put') {
        // Its appId and code hash vary, so an update in place (below) changes interned strings.
        const c = context(n, {
          expiresAt: now + 1 + rnd(100_000),
          licenseId: rnd(50) === 0 ? `odd-${n}` : uuid(n),
          appId: `app-${rnd(4)}`,
          codeHash: rnd(3) === 0 ? null : `hash-${rnd(3)}`,
        });
        const old = model.get(session);
        if (old && rnd(2)) {
          // Rewritten in place when both the stored context and the new one fit a slot; else left alone.
          const inPlace = !old.c.licenseId!.startsWith('odd-') && !c.licenseId!.startsWith('odd-');
          expect(p.update(c)).toBe(inPlace);
          if (inPlace) model.set(session, { c, group: old.group });
          expect(p.get(session)).toStrictEqual(model.get(session)!.c);
        } else {
          const group = rnd(8);
          p.put(c, group);
          model.set(session, { c, group });
        }
      } else if (op === 'delete') {
        expect(p.delete(session)).toBe(model.delete(session));
      } else if (op === 'take') {
        expect(p.get(session)).toStrictEqual(model.get(session)?.c);
        expect(p.delete(session)).toBe(model.delete(session));
      } else if (op === 'sweep') {
        now += filling ? rnd(100) : rnd(20_000);
        const expected = [...model].filter(([, e]) => e.c.expiresAt <= now).map(([s]) => s);
        const swept: string[] = [];
        expect(p.sweep(now, (c) => swept.push(c.session))).toBe(expected.length);
        expect(swept.sort()).toEqual(expected.sort());
        for (const s of expected) model.delete(s);
      } else if (op === 'drop') {
        const group = rnd(8);
        const expected = [...model].filter(([, e]) => e.group === group).map(([s]) => s);
        expect(p.removeGroup(group).sort()).toEqual(expected.sort());
        for (const s of expected) model.delete(s);
      } else {
        const license = uuid(n + 1_000);
        const expected = [...model].filter(([, e]) => e.c.licenseId === license).map(([s]) => s);
        expect(p.sessionsWhere('licenseId', license).sort()).toEqual(expected.sort());
      }
      expect(p.size).toBe(model.size);
      biggest = Math.max(biggest, p.slabBytes);
    }
    // A slot: 6 float64, 8 uint32 and 56 bytes (token, user, license, hwidHash): 136 bytes.
    const slot = 6 * 8 + 8 * 4 + 56;
    expect(biggest).toBeGreaterThanOrEqual(4096 * slot); // it did grow
    for (const [s, e] of model) expect(p.get(s)).toStrictEqual(e.c);
    expect([...p.contexts()].length).toBe(model.size);
    // Emptied, it gives its slots back (it grew to several thousand).
    for (const g of [0, 1, 2, 3, 4, 5, 6, 7]) p.removeGroup(g);
    expect(p.size).toBe(0);
    expect(p.interned).toBe(0);
    expect(p.slabBytes).toBeLessThanOrEqual(1024 * slot);
  });
});

describe('the host with packed passivated sessions', () => {
  const input = (n: number) => ({
    appId: `app-${n % 2}`,
    session: `s${n}`,
    token: token(n),
    systemId: `system-${n}`,
    beatInterval: 10,
    now: T0,
    userId: uuid(n),
    licenseId: uuid(n + 500),
    hwidHash: hwidHash(`DEVICE-${n}`),
  });
  const beat = (n: number, over: Partial<BeatInput> = {}): BeatInput => ({
    now: T0 + 1_000,
    token: token(n),
    systemId: `system-${n}`,
    beatIndex: 1,
    codeHash: 'ABCDEF0123',
    codeSize: 77,
    pinnedHash: '',
    injectionDetection: true,
    newToken: token(n + 10_000),
    ...over,
  });

  it('a session passivated and woken keeps every field and goes on being judged by them', () => {
    const host = new HeartbeatHost({ now: () => T0, maxLive: 1 });
    host.create(input(1));
    expect(host.send('s1', { type: 'BEAT', beat: beat(1) })?.verdict).toEqual({ kind: 'accepted', drift: false });
    const live = structuredClone(host.peek('s1')!);
    host.create(input(2)); // s1 is passivated
    expect(host.unpacked).toBe(1);
    expect(host.peek('s1')).toStrictEqual(live);
    expect(host.deadline('s1')).toBe(live.expiresAt);
    // Woken by its next beat: the baseline (code_size 77) and the token chain hold.
    const changed = host.send('s1', {
      type: 'BEAT',
      beat: beat(1, { token: token(10_001), beatIndex: 2, codeSize: 78 }),
    });
    expect(changed?.verdict).toEqual({ kind: 'killed', reason: 'code_changed' });
    expect(host.has('s1')).toBe(false);
    host.close();
  });

  it('the sweep evicts passivated sessions past their deadline, and only those', () => {
    let now = T0;
    const expired: string[] = [];
    const host = new HeartbeatHost({ now: () => now, maxLive: 2, onExpired: (c) => expired.push(c.session) });
    for (const n of [1, 2, 3, 4, 5]) host.create(input(n));
    now += 30_000;
    host.send('s1', { type: 'BEAT', beat: beat(1, { now }) }); // s1 (packed) has its deadline moved on
    expect(host.unpacked).toBe(2);
    now += 31_000; // past every deadline but s1's
    expect(host.sweep()).toBe(4);
    expect(expired.sort()).toEqual(['s2', 's3', 's4', 's5']);
    expect(host.size).toBe(1);
    expect(host.peek('s1')?.beatCount).toBe(1);
    host.close();
  });

  it('drops a group (a released shard) and finds sessions by app, user and license, live or passivated', () => {
    const host = new HeartbeatHost({ now: () => T0, maxLive: 2, groupOf: (s) => Number(s.slice(1)) % 3 });
    for (let n = 0; n < 12; n++) host.create(input(n));
    expect(host.countWhere('appId', 'app-0')).toBe(6);
    expect(host.sessionsWhere('licenseId', uuid(507)).sort()).toEqual(['s7']);
    expect(host.sessionsWhere('userId', uuid(11))).toEqual(['s11']); // live
    expect(host.sessionsWhere('userId', 'not-a-uuid')).toEqual([]);
    expect(host.removeGroup(1)).toBe(4);
    expect(
      host
        .contexts()
        .map((c) => c.session)
        .sort(),
    ).toEqual(['s0', 's11', 's2', 's3', 's5', 's6', 's8', 's9']);
    expect(host.countWhere('appId', 'app-0')).toBe(4);
    host.close();
  });
});
