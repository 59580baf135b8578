// The license actor walks docs/spec.md's key state table with injected steps (`provide`, no module mocks).
import { describe, expect, it } from 'vitest';
import { createActor, waitFor } from 'xstate';
import { pino } from 'pino';
import {
  isResting,
  licenseMachine,
  type Decision,
  type FinaliseOutput,
} from '../../../src/modules/activation/license.machine.js';
import { activateLane, LicenseHost, type LicenseEffects } from '../../../src/modules/activation/license-host.js';
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
  // One actor, observed from outside: the states it passes through are docs/spec.md's transitions.
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

describe('the activate lane against the machine', () => {
  // Scripted effects: each step takes the script's next answer for it; both runs see the same script
  // and must make the same calls, in the same order, and end with the same outcome.
  type Answer<T> = { value: T } | { fail: string };
  interface Script {
    decisions: Answer<Decision>[];
    writes: Answer<boolean>[];
  }
  function scripted(script: Script, calls: string[]): LicenseEffects {
    let d = 0;
    let w = 0;
    const next = <T>(list: Answer<T>[], i: number): T => {
      const a = list[i];
      if (!a) throw new Error('script ran out');
      if ('fail' in a) throw new Error(a.fail);
      return a.value;
    };
    return effects({
      decide: async (input) => {
        calls.push(`decide ${JSON.stringify(input)}`);
        return next(script.decisions, d++);
      },
      activateUnused: async (input) => {
        calls.push(`activateUnused ${JSON.stringify(input)}`);
        return next(script.writes, w++);
      },
      touchUsed: async (input) => {
        calls.push(`touchUsed ${JSON.stringify(input)}`);
        return next(script.writes, w++);
      },
    });
  }
  let seed = 11;
  const rand = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  const decision = (): Answer<Decision> => {
    switch (rand(6)) {
      case 0:
        return { fail: 'decide failed' };
      case 1:
        return {
          value: {
            kind: 'refuse',
            code: (['license_banned', 'hwid_mismatch', 'license_expired'] as const)[rand(3)]!,
            status: (['used', 'banned', 'unknown'] as const)[rand(3)]!,
          },
        };
      case 2:
      case 3:
        return { value: { kind: 'activate_unused', value: { level: rand(9) }, expiresAt: rand(2) ? null : 'x' } };
      default:
        return { value: { kind: 'touch_used', value: { level: rand(9) }, deferrable: rand(2) === 1 } };
    }
  };
  const write = (): Answer<boolean> => (rand(7) === 0 ? { fail: 'write failed' } : { value: rand(3) === 0 });

  it('makes the same calls and ends with the same outcome for 400 random scripts', async () => {
    for (let n = 0; n < 400; n++) {
      const script: Script = {
        decisions: Array.from({ length: 4 }, decision),
        writes: Array.from({ length: 4 }, write),
      };
      const viaMachine: string[] = [];
      const { snap } = await operate(scripted(script, viaMachine), activate);
      const viaLane: string[] = [];
      const lane = await activateLane(scripted(script, viaLane), 'k1', activate);
      expect(viaLane, JSON.stringify(script)).toEqual(viaMachine);
      const { opId: _, ...machineOutcome } = snap.context.lastOutcome!;
      const { cause, ...laneOutcome } = lane as typeof lane & { cause?: unknown };
      expect(laneOutcome, JSON.stringify(script)).toEqual(machineOutcome);
      if (!lane.ok && lane.code === 'internal') expect(cause).toBeInstanceOf(Error);
    }
  });
});
