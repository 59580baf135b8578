// A license key as an actor (SPEC "License key status"). Every operation on one key passes
// through its actor one at a time; the host (license-host.ts) queues operations so that an
// event never reaches the actor while it is busy. The effects are injected (`provide`) and do
// conditional UPDATEs, so the database stays the arbiter even across processes.
//
// The context is plain data (no callbacks): the host matches an operation's outcome by opId.
// Snapshots carry SNAPSHOT_VERSION; test/unit/license.machine.test.ts round-trips them.
import { assign, fromPromise, setup } from 'xstate';
import type { ErrorCode } from '../errors.js';
import type { LicenseStatus } from '../db/entities/index.js';

export const LICENSE_SNAPSHOT_VERSION = 1;

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
}

export type LicenseOp = RegisterOp | ActivateOp;

/** What an effect reports: the key's status afterwards and the operation's result or error code. */
export type EffectOutput =
  | { ok: true; status: LicenseStatus; value: Record<string, unknown> }
  | { ok: false; status: LicenseStatus | 'unknown'; code: ErrorCode };

export type Outcome = EffectOutput & { opId: number };

export interface LicenseContext {
  v: number;
  licenseId: string;
  /** Last status this actor saw in the database ('unknown' before the first operation). */
  status: LicenseStatus | 'unknown';
  /** The operation being worked on, while registering or activating. */
  pendingOpId: number | null;
  lastOutcome: Outcome | null;
}

export type LicenseEvent = { type: 'OPERATE'; opId: number; op: LicenseOp };

export interface EffectInput {
  licenseId: string;
  op: LicenseOp;
}

/** Placeholder effects: the host provides the real ones (db/repositories/license-ops.ts). */
const missing = fromPromise<EffectOutput, EffectInput>(async () => {
  throw new Error('license effects were not provided');
});

export const licenseMachine = setup({
  types: {
    context: {} as LicenseContext,
    events: {} as LicenseEvent,
    input: {} as { licenseId: string },
  },
  actors: { register: missing, activate: missing },
  actions: {
    settle: assign(({ context, event }) => {
      const output = (event as unknown as { output: EffectOutput }).output;
      return { status: output.status, pendingOpId: null, lastOutcome: { ...output, opId: context.pendingOpId ?? -1 } };
    }),
    // An effect that threw (not a coded outcome): the key's status is unknown until re-read.
    fail: assign(({ context }) => ({
      status: 'unknown' as const, pendingOpId: null,
      lastOutcome: { ok: false as const, status: 'unknown' as const, code: 'internal' as const, opId: context.pendingOpId ?? -1 },
    })),
  },
}).createMachine({
  id: 'license',
  context: ({ input }) => ({ v: LICENSE_SNAPSHOT_VERSION, licenseId: input.licenseId, status: 'unknown', pendingOpId: null, lastOutcome: null }),
  initial: 'idle',
  states: {
    idle: {
      on: {
        OPERATE: [
          { guard: ({ event }) => event.op.kind === 'register', target: 'registering', actions: assign({ pendingOpId: ({ event }) => event.opId }) },
          { target: 'activating', actions: assign({ pendingOpId: ({ event }) => event.opId }) },
        ],
      },
    },
    // unused -> pending -> used, or back to its previous status on failure (SPEC state table).
    registering: {
      invoke: {
        src: 'register',
        input: ({ context, event }) => ({ licenseId: context.licenseId, op: (event as LicenseEvent).op }),
        onDone: { target: 'idle', actions: 'settle' },
        onError: { target: 'idle', actions: 'fail' },
      },
    },
    // unused -> used (license-only), or a check of a used key (hwid, expiry).
    activating: {
      invoke: {
        src: 'activate',
        input: ({ context, event }) => ({ licenseId: context.licenseId, op: (event as LicenseEvent).op }),
        onDone: { target: 'idle', actions: 'settle' },
        onError: { target: 'idle', actions: 'fail' },
      },
    },
  },
});
