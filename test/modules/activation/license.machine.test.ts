// The license actor walks SPEC's key state table with injected steps (`provide`, no module mocks).
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { pino } from 'pino';
import {
  isResting,
  licenseMachine,
  type Decision,
  type FinaliseOutput,
} from '../../../src/modules/activation/license.machine.js';
import { LicenseHost, type LicenseEffects } from '../../../src/modules/activation/license-host.js';
import { AppError } from '../../../src/errors.js';

const activate = {
  kind: 'activate' as const,
  appId: 'a',
  hwid: 'h'.repeat(8),
  ip: '1.1.1.1',
  hwidLock: false,
  maxDevices: 1,
};
const register = {
  kind: 'register' as const,
  appId: 'a',
  username: 'u1',
  passwordHash: 'x',
  hwid: 'h'.repeat(8),
  ip: '1.1.1.1',
  hwidLock: false,
};
const claim: Decision = {
  kind: 'claim',
  status: 'unused',
  at: 1000,
  grant: { level: 2, expiresAt: null, resellerId: null, entitlements: [] },
};

function effects(over: Partial<LicenseEffects>): LicenseEffects {
  const never = async () => {
    throw new Error('unexpected step');
  };
  return {
    decide: never,
    claim: never,
    afterClaim: async () => undefined,
    finalise: never,
    release: never,
    activateUnused: never,
    touchUsed: never,
    ...over,
  };
}

async function operate(fx: LicenseEffects, op: typeof activate | typeof register) {
  const host = new LicenseHost(fx, { log: pino({ level: 'silent' }), now: () => 0 });
  const visited: string[] = [];
  // One actor, observed from outside: the states it passes through are SPEC's transitions.
  const m = (host as unknown as { machine: typeof licenseMachine }).machine;
  const a = createActor(m, { input: { licenseId: 'k1' } });
  a.subscribe((s) => visited.push(String(s.value)));
  a.start();
  a.send({ type: 'OPERATE', opId: 1, op });
  const snap = await waitFor(a, (s) => isResting(s) && s.context.lastOutcome !== null);
  host.close();
  return { snap, visited };
}

describe('license machine', () => {
  it('register: unused -> pending (claim) -> used (finalise)', async () => {
    const { snap, visited } = await operate(
      effects({
        decide: async () => claim,
        claim: async () => true,
        finalise: async (): Promise<FinaliseOutput> => ({ result: 'done', value: { userId: 'u', level: 2 } }),
      }),
      register,
    );
    expect(snap.value).toBe('used');
    expect(snap.context.lastOutcome).toEqual({ opId: 1, ok: true, value: { userId: 'u', level: 2 } });
    expect(visited).toEqual(['unknown', 'deciding', 'claiming', 'claimed', 'finalising', 'used']);
  });

  it('register: a taken username releases the claim back to the status before it', async () => {
    const released: string[] = [];
    const { snap, visited } = await operate(
      effects({
        decide: async () => claim,
        claim: async () => true,
        finalise: async () => ({ result: 'username_taken' as const }),
        release: async (i) => {
          released.push(`${i.claimedFrom}@${i.stamp}`);
        },
      }),
      register,
    );
    expect(released).toEqual(['unused@1000']);
    expect(snap.value).toBe('unused');
    expect(snap.context.lastOutcome).toEqual({ opId: 1, ok: false, code: 'username_taken' });
    expect(visited).toContain('releasing');
  });

  it('register: a lost claim is license_used; a claim changed under us is left alone (409)', async () => {
    const lost = await operate(effects({ decide: async () => claim, claim: async () => false }), register);
    expect(lost.snap.context.lastOutcome).toMatchObject({ ok: false, code: 'license_used' });
    const changed = await operate(
      effects({
        decide: async () => claim,
        claim: async () => true,
        finalise: async () => ({ result: 'state_changed' as const }),
      }),
      register,
    );
    expect(changed.snap.context.lastOutcome).toMatchObject({ ok: false, code: 'license_state_changed' });
    expect(changed.visited).not.toContain('releasing');
  });

  it('a refusal rests in the status the policy saw', async () => {
    const { snap } = await operate(
      effects({ decide: async () => ({ kind: 'refuse', code: 'license_banned', status: 'banned' }) }),
      register,
    );
    expect(snap.value).toBe('banned');
    expect(snap.context.lastOutcome).toMatchObject({ ok: false, code: 'license_banned' });
  });

  it('activate: a conditional write that misses decides again, at most three times', async () => {
    let decisions = 0;
    let writes = 0;
    const { snap } = await operate(
      effects({
        decide: async () => {
          decisions++;
          return { kind: 'activate_unused', expiresAt: null, value: { level: 1 } };
        },
        activateUnused: async () => ++writes === 3,
      }),
      activate,
    );
    expect(decisions).toBe(3);
    expect(snap.value).toBe('used');
    const busy = await operate(
      effects({
        decide: async () => ({ kind: 'touch_used', value: { level: 1 } }),
        touchUsed: async () => false,
      }),
      activate,
    );
    expect(busy.snap.context.lastOutcome).toMatchObject({ ok: false, code: 'license_in_progress' });
  });

  it('a step that throws reports internal and leaves the status unknown', async () => {
    const { snap } = await operate(
      effects({
        decide: async () => {
          throw new Error('db down');
        },
      }),
      activate,
    );
    expect(snap.value).toBe('unknown');
    expect(snap.context.lastOutcome).toMatchObject({ ok: false, code: 'internal' });
  });
});

describe('license host', () => {
  it('runs operations on one key one at a time, in order, and maps outcomes to coded errors', async () => {
    const log: string[] = [];
    let active = 0;
    const host = new LicenseHost(
      effects({
        decide: async ({ op }) =>
          op.kind === 'register'
            ? { kind: 'refuse', code: 'license_used', status: 'used' }
            : { kind: 'touch_used', value: {} },
        touchUsed: async () => {
          active++;
          expect(active).toBe(1);
          log.push('start');
          await new Promise((r) => setImmediate(r));
          log.push('end');
          active--;
          return true;
        },
      }),
      { log: pino({ level: 'silent' }), now: () => Date.now() },
    );
    await Promise.all([host.run('k', activate), host.run('k', activate), host.run('k', activate)]);
    expect(log).toEqual(['start', 'end', 'start', 'end', 'start', 'end']);
    await expect(host.run('k', register)).rejects.toEqual(new AppError('license_used'));
    expect(host.passivate(0)).toBe(1);
    host.close();
  });
});
