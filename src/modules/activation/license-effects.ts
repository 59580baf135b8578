// The steps the license actor sequences (license.machine.ts), made of the policy's decisions
// (license-policy.ts) and the repository's conditional writes (license-ops.repository.ts). Values
// returned to the client are built here, from the key as the decision saw it.
import { randomUUID } from 'node:crypto';
import type { LicenseEffects } from './license-host.js';
import type { Decision, RegisterOp } from './license.machine.js';
import type { KeyTouchesRepository, LicenseOpsRepository } from '../keys/index.js';
import { deviceLimit, isLicenseOnly, judgeActivate, judgeRegister, registeredExpiry } from './license-policy.js';

interface LicenseEffectOptions {
  now: () => number;
  /** Test-only fault injection (FAULT_AFTER_CLAIM_MS): pause between claim and finalise. */
  afterClaimMs?: number;
}

const iso = (d: Date | null) => d?.toISOString() ?? null;
const orNull = (s: string | null) => (s === null ? null : new Date(s));

export function licenseEffects(
  repo: LicenseOpsRepository,
  touches: KeyTouchesRepository,
  opts: LicenseEffectOptions,
): LicenseEffects {
  return {
    async decide({ licenseId, op }): Promise<Decision> {
      const now = opts.now();
      if (op.kind === 'register') {
        const key = await repo.load(licenseId);
        const v = judgeRegister(key);
        if (!v.ok) return { kind: 'refuse', code: v.code, status: key?.status ?? 'unknown' };
        return {
          kind: 'claim',
          status: v.key.status,
          at: now,
          grant: {
            level: v.key.level,
            expiresAt: iso(registeredExpiry(v.key, now)),
            resellerId: v.key.resellerId,
            entitlements: v.key.entitlements,
          },
        };
      }
      // One round trip: the key, and what its devices say of this HWID (used only when they count).
      const read = await repo.loadWithDevice(licenseId, op.hwid);
      const key = read?.key;
      const facts = key?.status === 'used' && isLicenseOnly(key) ? read!.device : undefined;
      const v = judgeActivate(key, op, now, facts);
      if (!v.ok) return { kind: 'refuse', code: v.code, status: key?.status ?? 'unknown' };
      const value = {
        level: key!.level,
        expiresAt: iso(v.expiresAt),
        resellerId: key!.resellerId,
        newDevice: v.kind === 'first_use' || v.newDevice,
        firstUse: v.kind === 'first_use',
        entitlements: key!.entitlements,
        // Devices are the key's own when it is (or becomes) license-only; a registered key's are its user's.
        licenseOnly: v.kind === 'first_use' || isLicenseOnly(key!),
        deviceHeld: facts?.held === true,
        maxDevices: deviceLimit(key!, op.maxDevices),
      };
      return v.kind === 'first_use'
        ? { kind: 'activate_unused', value, expiresAt: iso(v.expiresAt) }
        : { kind: 'touch_used', value, deferrable: key!.hwid !== '' };
    },
    claim: ({ licenseId, stamp }) => repo.claim(licenseId, new Date(stamp)),
    afterClaim: () => new Promise<void>((r) => setTimeout(r, opts.afterClaimMs ?? 0)),
    async finalise({ licenseId, op, stamp, decision }) {
      const o = op as RegisterOp;
      const { grant } = decision as Extract<Decision, { kind: 'claim' }>;
      const userId = randomUUID();
      const result = await repo.finalise(
        licenseId,
        new Date(stamp),
        {
          id: userId,
          appId: o.appId,
          username: o.username,
          passwordHash: o.passwordHash,
          ip: o.ip,
          hwid: o.hwidLock ? o.hwid : '',
          knownHwid: o.hwid,
          level: grant.level,
          expiresAt: orNull(grant.expiresAt),
          resellerId: grant.resellerId,
        },
        new Date(opts.now()),
      );
      if (result !== 'done') return { result };
      return {
        result,
        value: {
          userId,
          username: o.username,
          level: grant.level,
          expiresAt: grant.expiresAt,
          resellerId: grant.resellerId,
          entitlements: grant.entitlements,
        },
      };
    },
    release: ({ licenseId, stamp, claimedFrom }) => repo.release(licenseId, claimedFrom ?? 'unused', new Date(stamp)),
    activateUnused: ({ licenseId, op, decision }) =>
      repo.activateUnused(licenseId, {
        hwid: op.hwid,
        ip: op.ip,
        expiresAt: orNull((decision as Extract<Decision, { kind: 'activate_unused' }>).expiresAt),
        now: new Date(opts.now()),
      }),
    async touchUsed({ licenseId, op, decision }) {
      const now = new Date(opts.now());
      if (!(decision as Extract<Decision, { kind: 'touch_used' }>).deferrable)
        return repo.touchUsed(licenseId, { hwid: op.hwid, ip: op.ip, now });
      // The answer does not depend on last_login and ip: written behind, coalesced per key.
      await touches.touch(licenseId, { ip: op.ip, at: now });
      return true;
    },
  };
}
