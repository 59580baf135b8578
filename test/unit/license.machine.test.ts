import { describe, expect, it } from 'vitest';
import { createActor, fromPromise, waitFor } from 'xstate';
import { pino } from 'pino';
import { LICENSE_SNAPSHOT_VERSION, licenseMachine, type EffectInput, type EffectOutput } from '../../src/actors/license.machine.js';
import { LicenseHost } from '../../src/actors/license-host.js';
import { AppError } from '../../src/errors.js';

const op = { kind: 'activate' as const, appId: 'a', hwid: 'h'.repeat(8), ip: '1.1.1.1', hwidLock: false };

describe('license machine', () => {
  it('runs one operation and records its outcome by opId; the snapshot round-trips', async () => {
    const m = licenseMachine.provide({ actors: { activate: fromPromise<EffectOutput, EffectInput>(async () => ({ ok: true, status: 'used', value: { level: 1 } })) } });
    const a = createActor(m, { input: { licenseId: 'k1' } }).start();
    a.send({ type: 'OPERATE', opId: 7, op });
    const snap = await waitFor(a, (s) => s.matches('idle') && s.context.lastOutcome !== null);
    expect(snap.context).toMatchObject({ status: 'used', pendingOpId: null, lastOutcome: { opId: 7, ok: true } });
    const persisted = JSON.parse(JSON.stringify(a.getPersistedSnapshot()));
    expect(persisted.context.v).toBe(LICENSE_SNAPSHOT_VERSION);
    const b = createActor(m, { snapshot: persisted, input: { licenseId: 'k1' } }).start();
    expect(b.getSnapshot().context.status).toBe('used');
  });

  it('an effect that throws leaves the status unknown and reports internal', async () => {
    const m = licenseMachine.provide({ actors: { activate: fromPromise<EffectOutput, EffectInput>(async () => { throw new Error('db down'); }) } });
    const a = createActor(m, { input: { licenseId: 'k1' } }).start();
    a.send({ type: 'OPERATE', opId: 1, op });
    const snap = await waitFor(a, (s) => s.matches('idle') && s.context.lastOutcome !== null);
    expect(snap.context.lastOutcome).toMatchObject({ ok: false, code: 'internal' });
  });
});

describe('license host', () => {
  it('runs operations on one key one at a time, in order, and maps outcomes to coded errors', async () => {
    const log: string[] = [];
    let active = 0;
    const effects = {
      register: async () => ({ ok: false as const, status: 'used' as const, code: 'license_used' as const }),
      activate: async (_id: string) => {
        active++;
        expect(active).toBe(1);
        log.push('start');
        await new Promise((r) => setImmediate(r));
        log.push('end');
        active--;
        return { ok: true as const, status: 'used' as const, value: { n: log.length } };
      },
    };
    const host = new LicenseHost(effects, { log: pino({ level: 'silent' }), now: () => Date.now() });
    const results = await Promise.all([host.run('k', op), host.run('k', op), host.run('k', op)]);
    expect(log).toEqual(['start', 'end', 'start', 'end', 'start', 'end']);
    expect(results.map((r) => r.n)).toEqual([2, 4, 6]);
    await expect(host.run('k', { ...op, kind: 'register', username: 'u', passwordHash: 'x' } as never)).rejects.toEqual(new AppError('license_used'));
    expect(host.passivate(0)).toBe(1);
    host.close();
  });
});
