// A license key as an actor: its states are the key's states of docs/spec.md's "License key status" table
// (unused, pending, used, banned; unknown until first read) and its transitions are that table's:
// register claims (unused -> pending), finalises (pending -> used) or releases (pending -> the
// status before the claim); a license-only activation takes unused -> used or checks a used key.
// Every step is an injected effect (`provide`): the decision is the policy's (license-policy.ts,
// asked through `decide`), every write a conditional UPDATE (license-ops.repository.ts), so the
// database stays the arbiter across processes and this actor makes one key's operations take turns
// within a worker. A conditional write that finds the key changed makes it decide again (at most
// LICENSE_MAX_ATTEMPTS times). The context is plain data; snapshots carry LICENSE_SNAPSHOT_VERSION.
import { assign, fromPromise, setup } from 'xstate';
import type { ErrorCode } from '../../errors.js';
import type { LicenseStatus } from '../../platform/db/entities/index.js';

const LICENSE_SNAPSHOT_VERSION = 2;
/** Decisions an operation may take when its conditional writes keep missing. */
export const LICENSE_MAX_ATTEMPTS = 3;

export interface RegisterOp {
  kind: 'register';
  appId: string;
  username: string;
  passwordHash: string;
  hwid: string;
  ip: string;
  hwidLock: boolean;
}

export interface ActivateOp {
  kind: 'activate';
  appId: string;
  hwid: string;
  ip: string;
  hwidLock: boolean;
  /** The application's max_devices (a key's own overrides it). */
  maxDevices: number;
}

export type LicenseOp = RegisterOp | ActivateOp;
type KnownStatus = LicenseStatus | 'unknown';

/** What the policy decided for an operation on the key as it is now. */
export type Decision =
  | { kind: 'refuse'; code: ErrorCode; status: KnownStatus }
  | {
      kind: 'claim';
      status: LicenseStatus;
      at: number;
      grant: { level: number; expiresAt: string | null; resellerId: string | null; entitlements: string[] };
    }
  | { kind: 'activate_unused'; value: Record<string, unknown>; expiresAt: string | null }
  | {
      kind: 'touch_used';
      value: Record<string, unknown>;
      /** Only last login and IP change (the HWID is bound already): the write may go behind the answer. */
      deferrable?: boolean;
    };

export type FinaliseOutput =
  { result: 'done'; value: Record<string, unknown> } | { result: 'username_taken' | 'state_changed' };

type Outcome =
  | { opId: number; ok: true; value: Record<string, unknown> }
  | { opId: number; ok: false; code: ErrorCode | 'internal' };

interface Work {
  opId: number;
  op: LicenseOp;
  attempts: number;
  decision: Decision | null;
  /** Claim stamp (ms) while pending. */
  stamp: number | null;
}

interface LicenseContext {
  v: number;
  licenseId: string;
  /** The key's status as this actor last saw or made it. */
  status: KnownStatus;
  /** Status before a claim, restored by a release. */
  claimedFrom: LicenseStatus | null;
  work: Work | null;
  lastOutcome: Outcome | null;
}

type LicenseEvent = { type: 'OPERATE'; opId: number; op: LicenseOp };

export interface DecideInput {
  licenseId: string;
  op: LicenseOp;
}
export interface WriteInput {
  licenseId: string;
  op: LicenseOp;
  stamp: number;
  decision: Decision;
  claimedFrom: LicenseStatus | null;
}

const missing = <O, I>(name: string) =>
  fromPromise<O, I>(async () => {
    throw new Error(`license effect ${name} was not provided`);
  });

const RESTING_TAG = 'resting';

export const licenseMachine = setup({
  types: {
    context: {} as LicenseContext,
    events: {} as LicenseEvent,
    input: {} as { licenseId: string },
    tags: {} as typeof RESTING_TAG,
  },
  actors: {
    decide: missing<Decision, DecideInput>('decide'),
    claim: missing<boolean, WriteInput>('claim'),
    afterClaim: missing<void, WriteInput>('afterClaim'),
    finalise: missing<FinaliseOutput, WriteInput>('finalise'),
    release: missing<void, WriteInput>('release'),
    activateUnused: missing<boolean, WriteInput>('activateUnused'),
    touchUsed: missing<boolean, WriteInput>('touchUsed'),
  },
  guards: {
    refused: ({ context }) => context.work?.decision?.kind === 'refuse',
    claims: ({ context }) => context.work?.decision?.kind === 'claim',
    activatesUnused: ({ context }) => context.work?.decision?.kind === 'activate_unused',
    wrote: (_, ok: boolean) => ok,
    mayRetry: ({ context }) => (context.work?.attempts ?? LICENSE_MAX_ATTEMPTS) < LICENSE_MAX_ATTEMPTS,
    isUnused: ({ context }) => context.status === 'unused',
    isPending: ({ context }) => context.status === 'pending',
    isUsed: ({ context }) => context.status === 'used',
    isBanned: ({ context }) => context.status === 'banned',
  },
  actions: {
    begin: assign({
      work: ({ event }) => ({ opId: event.opId, op: event.op, attempts: 0, decision: null, stamp: null }),
    }),
    decided: assign({
      work: ({ context }, decision: Decision) => ({ ...context.work!, decision, attempts: context.work!.attempts + 1 }),
    }),
    succeed: assign(({ context }, a: { value: Record<string, unknown> }) => ({
      status: 'used' as const,
      claimedFrom: null,
      work: null,
      lastOutcome: { opId: context.work!.opId, ok: true as const, value: a.value },
    })),
    refuse: assign(({ context }, a: { code: ErrorCode | 'internal'; status: KnownStatus }) => ({
      status: a.status,
      claimedFrom: null,
      work: null,
      lastOutcome: { opId: context.work!.opId, ok: false as const, code: a.code },
    })),
  },
}).createMachine({
  id: 'license',
  context: ({ input }) => ({
    v: LICENSE_SNAPSHOT_VERSION,
    licenseId: input.licenseId,
    status: 'unknown',
    claimedFrom: null,
    work: null,
    lastOutcome: null,
  }),
  initial: 'unknown',
  states: {
    unknown: { tags: RESTING_TAG, on: { OPERATE: { target: 'deciding', actions: 'begin' } } },
    unused: { tags: RESTING_TAG, on: { OPERATE: { target: 'deciding', actions: 'begin' } } },
    pending: { tags: RESTING_TAG, on: { OPERATE: { target: 'deciding', actions: 'begin' } } },
    used: { tags: RESTING_TAG, on: { OPERATE: { target: 'deciding', actions: 'begin' } } },
    banned: { tags: RESTING_TAG, on: { OPERATE: { target: 'deciding', actions: 'begin' } } },

    deciding: {
      invoke: {
        src: 'decide',
        input: ({ context }) => ({ licenseId: context.licenseId, op: context.work!.op }),
        onDone: { target: 'decided', actions: { type: 'decided', params: ({ event }) => event.output } },
        onError: { target: 'settled', actions: { type: 'refuse', params: { code: 'internal', status: 'unknown' } } },
      },
    },
    decided: {
      always: [
        {
          guard: 'refused',
          target: 'settled',
          actions: {
            type: 'refuse',
            params: ({ context }) => {
              const d = context.work!.decision as Extract<Decision, { kind: 'refuse' }>;
              return { code: d.code, status: d.status };
            },
          },
        },
        {
          guard: 'claims',
          target: 'claiming',
          actions: assign(({ context }) => {
            const d = context.work!.decision as Extract<Decision, { kind: 'claim' }>;
            return { claimedFrom: d.status, work: { ...context.work!, stamp: d.at } };
          }),
        },
        { guard: 'activatesUnused', target: 'activatingUnused' },
        { target: 'touchingUsed' },
      ],
    },

    // register: unused -> pending (the claim), then pending -> used or back.
    claiming: {
      invoke: {
        src: 'claim',
        input: writeInput,
        onDone: [
          {
            guard: { type: 'wrote', params: ({ event }) => event.output },
            target: 'claimed',
            actions: assign({ status: 'pending' }),
          },
          // Lost a race for the key (another process claimed it since it was read).
          { target: 'settled', actions: { type: 'refuse', params: { code: 'license_used', status: 'unknown' } } },
        ],
        onError: { target: 'settled', actions: { type: 'refuse', params: { code: 'internal', status: 'unknown' } } },
      },
    },
    claimed: {
      invoke: {
        src: 'afterClaim',
        input: writeInput,
        onDone: 'finalising',
        onError: {
          target: 'releasing',
          actions: assign(({ context }) => ({
            lastOutcome: { opId: context.work!.opId, ok: false as const, code: 'internal' as const },
          })),
        },
      },
    },
    finalising: {
      invoke: {
        src: 'finalise',
        input: writeInput,
        onDone: [
          {
            guard: ({ event }) => event.output.result === 'done',
            target: 'settled',
            actions: {
              type: 'succeed',
              params: ({ event }) => ({ value: (event.output as { value: Record<string, unknown> }).value }),
            },
          },
          {
            // docs/spec.md: a claim whose state changed under us is left alone.
            guard: ({ event }) => event.output.result === 'state_changed',
            target: 'settled',
            actions: { type: 'refuse', params: { code: 'license_state_changed', status: 'unknown' } },
          },
          {
            target: 'releasing',
            actions: assign(({ context }) => ({
              lastOutcome: { opId: context.work!.opId, ok: false as const, code: 'username_taken' as const },
            })),
          },
        ],
        onError: {
          target: 'releasing',
          actions: assign(({ context }) => ({
            lastOutcome: { opId: context.work!.opId, ok: false as const, code: 'internal' as const },
          })),
        },
      },
    },
    // pending -> the status before the claim; the refusal was recorded on the way in.
    releasing: {
      invoke: {
        src: 'release',
        input: writeInput,
        onDone: {
          target: 'settled',
          actions: assign(({ context }) => ({
            status: context.claimedFrom ?? 'unknown',
            claimedFrom: null,
            work: null,
          })),
        },
        onError: { target: 'settled', actions: assign({ status: 'unknown', claimedFrom: null, work: null }) },
      },
    },

    // license-only: unused -> used, or the return of a used key.
    activatingUnused: {
      invoke: {
        src: 'activateUnused',
        input: writeInput,
        onDone: [
          {
            guard: { type: 'wrote', params: ({ event }) => event.output },
            target: 'settled',
            actions: {
              type: 'succeed',
              params: ({ context }) => ({
                value: (context.work!.decision as Extract<Decision, { kind: 'activate_unused' }>).value,
              }),
            },
          },
          { guard: 'mayRetry', target: 'deciding' },
          {
            target: 'settled',
            actions: { type: 'refuse', params: { code: 'license_in_progress', status: 'unknown' } },
          },
        ],
        onError: { target: 'settled', actions: { type: 'refuse', params: { code: 'internal', status: 'unknown' } } },
      },
    },
    touchingUsed: {
      invoke: {
        src: 'touchUsed',
        input: writeInput,
        onDone: [
          {
            guard: { type: 'wrote', params: ({ event }) => event.output },
            target: 'settled',
            actions: {
              type: 'succeed',
              params: ({ context }) => ({
                value: (context.work!.decision as Extract<Decision, { kind: 'touch_used' }>).value,
              }),
            },
          },
          { guard: 'mayRetry', target: 'deciding' },
          {
            target: 'settled',
            actions: { type: 'refuse', params: { code: 'license_in_progress', status: 'unknown' } },
          },
        ],
        onError: { target: 'settled', actions: { type: 'refuse', params: { code: 'internal', status: 'unknown' } } },
      },
    },

    // Rest in the state named by the key's status.
    settled: {
      always: [
        { guard: 'isUnused', target: 'unused' },
        { guard: 'isPending', target: 'pending' },
        { guard: 'isUsed', target: 'used' },
        { guard: 'isBanned', target: 'banned' },
        { target: 'unknown' },
      ],
    },
  },
});

function writeInput({ context }: { context: LicenseContext }): WriteInput {
  const w = context.work!;
  return {
    licenseId: context.licenseId,
    op: w.op,
    stamp: w.stamp ?? 0,
    decision: w.decision!,
    claimedFrom: context.claimedFrom,
  };
}

export function isResting(snapshot: { hasTag(tag: typeof RESTING_TAG): boolean }): boolean {
  return snapshot.hasTag(RESTING_TAG);
}
