// A heartbeat session as an actor (docs/spec.md "Heartbeat session", "Limits", docs/protocol.md 6, 11.13).
// Pure: time, the next token and the application's settings arrive in the event. Deadlines live
// in context (`expiresAt`) and a sweeper expires them; there are no `after` timers, which would
// not survive a snapshot. Snapshots carry HEARTBEAT_SNAPSHOT_VERSION.
import { assign, setup } from 'xstate';
import { constantTimeEqual, sha256 } from '../../platform/crypto/index.js';
import { normalizeHwid } from '../client/index.js';

/** 2: the context carries `hwidHash` (version 1 snapshots decode with hwidHash null). */
export const HEARTBEAT_SNAPSHOT_VERSION = 2;
const TOKEN_FORMAT = /^TT[0-9a-f]{32}$/;
const MAX_WARNINGS = 3;

export interface HeartbeatContext {
  v: number;
  appId: string;
  /** The client session (nonce) this heartbeat belongs to. */
  session: string;
  token: string;
  systemId: string;
  beatInterval: number;
  lastBeatIndex: number;
  beatCount: number;
  warnings: number;
  /** When the previous beat (or the start) was accepted, ms. */
  lastBeatAt: number;
  startedAt: number;
  /** Deadline after which the sweeper evicts the session, ms. */
  expiresAt: number;
  codeHash: string | null;
  codeSize: number | null;
  userId: string | null;
  licenseId: string | null;
  /**
   * The device the client session was activated from, as hwidHash(hwid); null when unknown (a
   * session activated before the hwid was recorded): a removal of any device of its key ends it.
   */
  hwidHash: string | null;
  /** What the last event did (read by the host to answer the request). */
  last: BeatVerdict | null;
}

export interface BeatInput {
  now: number;
  token: string;
  systemId: string;
  beatIndex: number;
  codeHash?: string | undefined;
  codeSize?: number | undefined;
  debuggerDetected?: boolean | undefined;
  /** The application's pinned expected_binary_hash ('' when none). */
  pinnedHash: string;
  injectionDetection: boolean;
  /** The token issued if this beat is accepted. */
  newToken: string;
}

export type KillReason =
  | 'system_id'
  | 'no_code_hash'
  | 'code_changed'
  | 'pinned_hash'
  | 'drift'
  | 'debugger'
  | 'revoked'
  | 'session_limit'
  | 'expired';
export type RejectReason = 'token' | 'replay';

export type BeatVerdict =
  | { kind: 'accepted'; drift: boolean }
  | { kind: 'rejected'; reason: RejectReason }
  | { kind: 'killed'; reason: KillReason }
  | { kind: 'stopped' }
  | { kind: 'stop_refused' };

export type HeartbeatEvent =
  { type: 'BEAT'; beat: BeatInput } | { type: 'STOP'; token: string } | { type: 'KILL'; reason: KillReason };

/**
 * A device as a session keeps it: the first 8 bytes of SHA-256 of the lower-cased HWID, 16 hex
 * digits. A HWID may be 128 characters and every live session carries one, so the context
 * keeps this fixed 8 bytes instead (the packed passive store holds it in its slot). Only the
 * sessions of one key or user are compared with a removed device's hash: a collision between two
 * devices of one key (2^-64 per pair) would at worst end one more session of that key.
 */
export function hwidHash(hwid: string): string {
  return sha256(normalizeHwid(hwid)).toString('hex', 0, 8);
}

export function expiryWindowMs(beatInterval: number): number {
  return Math.max(60, beatInterval * 6) * 1000;
}

/** docs/spec.md "Session alive": not past its deadline, and no beat yet or the last one at most 3 intervals old. */
export function sessionAlive(c: HeartbeatContext, now: number): boolean {
  if (c.expiresAt <= now) return false;
  return c.beatCount === 0 || now - c.lastBeatAt <= c.beatInterval * 3 * 1000;
}

function tokenMatches(expected: string, given: string): boolean {
  // Malformed tokens are refused like wrong ones (docs/protocol.md 6); the compare is constant-time.
  return TOKEN_FORMAT.test(given) && constantTimeEqual(expected, given);
}

/** The docs/spec.md's checks in order; the order is the policy. */
export function judgeBeat(c: HeartbeatContext, b: BeatInput): BeatVerdict & { warnings?: number } {
  if (!tokenMatches(c.token, b.token)) return { kind: 'rejected', reason: 'token' };
  if (b.beatIndex <= c.lastBeatIndex) return { kind: 'rejected', reason: 'replay' };
  if (b.systemId !== c.systemId) return { kind: 'killed', reason: 'system_id' };
  if (b.debuggerDetected === true && b.injectionDetection) return { kind: 'killed', reason: 'debugger' };
  const hash = b.codeHash?.toLowerCase();
  if (b.pinnedHash) {
    if (hash !== undefined && hash !== b.pinnedHash.toLowerCase()) return { kind: 'killed', reason: 'pinned_hash' };
  } else if (c.beatCount === 0 && hash === undefined) {
    return { kind: 'killed', reason: 'no_code_hash' };
  }
  if (c.beatCount > 0) {
    if (hash !== undefined && c.codeHash !== null && hash !== c.codeHash)
      return { kind: 'killed', reason: 'code_changed' };
    if (b.codeSize !== undefined && c.codeSize !== null && b.codeSize !== c.codeSize)
      return { kind: 'killed', reason: 'code_changed' };
  }
  const late = b.now - c.lastBeatAt > c.beatInterval * 2.5 * 1000;
  const warnings = late ? c.warnings + 1 : Math.max(0, c.warnings - 1);
  if (warnings >= MAX_WARNINGS) return { kind: 'killed', reason: 'drift' };
  return { kind: 'accepted', drift: late, warnings };
}

/**
 * judgeBeat once per event: the BEAT transition's guards and its assignment all need the verdict,
 * and each call would otherwise repeat the token compare. Keyed by the event's beat (a fresh object
 * per request) and checked against the context it was judged on, so a memo can never be stale.
 */
const judged = new WeakMap<BeatInput, { context: HeartbeatContext; verdict: ReturnType<typeof judgeBeat> }>();
function verdictOf(context: HeartbeatContext, beat: BeatInput): ReturnType<typeof judgeBeat> {
  const memo = judged.get(beat);
  if (memo?.context === context) return memo.verdict;
  const verdict = judgeBeat(context, beat);
  judged.set(beat, { context, verdict });
  return verdict;
}

type Accepted = { kind: 'accepted'; drift: boolean; warnings: number };

/** What an accepted beat changes: the machine's assignment on its `accepted` branch. */
function acceptedChanges(context: HeartbeatContext, b: BeatInput, v: Accepted) {
  const first = context.beatCount === 0;
  return {
    token: b.newToken,
    lastBeatIndex: b.beatIndex,
    beatCount: context.beatCount + 1,
    warnings: v.warnings,
    lastBeatAt: b.now,
    expiresAt: b.now + expiryWindowMs(context.beatInterval),
    // The first beat sets the baseline the later ones are compared with.
    codeHash: first ? (b.codeHash?.toLowerCase() ?? null) : context.codeHash,
    codeSize: first ? (b.codeSize ?? null) : context.codeSize,
    last: v.drift ? ACCEPTED_LATE : ACCEPTED,
  };
}
const ACCEPTED: BeatVerdict = Object.freeze({ kind: 'accepted', drift: false });
const ACCEPTED_LATE: BeatVerdict = Object.freeze({ kind: 'accepted', drift: true });

/**
 * The BEAT transition of an alive session that judgeBeat accepts, without the interpreter: the
 * machine's first BEAT branch has guard `accepted`, no target and acceptedChanges() as its only
 * action, so its next context is this one. It is the steady load (every 30 s per client); any other
 * event (a refused or killing beat, STOP, KILL) returns undefined and goes through the machine.
 * heartbeat.machine.test.ts runs random event sequences through both and compares.
 */
export function acceptedBeat(c: HeartbeatContext, b: BeatInput): HeartbeatContext | undefined {
  const v = judgeBeat(c, b);
  return v.kind === 'accepted' ? { ...c, ...acceptedChanges(c, b, v as Accepted) } : undefined;
}

export interface HeartbeatInput {
  appId: string;
  session: string;
  token: string;
  systemId: string;
  beatInterval: number;
  now: number;
  userId: string | null;
  licenseId: string | null;
  hwidHash: string | null;
}

export const heartbeatMachine = setup({
  types: {
    context: {} as HeartbeatContext,
    events: {} as HeartbeatEvent,
    input: {} as HeartbeatInput,
  },
  guards: {
    accepted: ({ context, event }) => event.type === 'BEAT' && verdictOf(context, event.beat).kind === 'accepted',
    rejected: ({ context, event }) => event.type === 'BEAT' && verdictOf(context, event.beat).kind === 'rejected',
    tokenMatches: ({ context, event }) => event.type === 'STOP' && tokenMatches(context.token, event.token),
  },
}).createMachine({
  id: 'heartbeat',
  context: ({ input }) => ({
    v: HEARTBEAT_SNAPSHOT_VERSION,
    appId: input.appId,
    session: input.session,
    token: input.token,
    systemId: input.systemId,
    beatInterval: input.beatInterval,
    lastBeatIndex: 0,
    beatCount: 0,
    warnings: 0,
    lastBeatAt: input.now,
    startedAt: input.now,
    expiresAt: input.now + expiryWindowMs(input.beatInterval),
    codeHash: null,
    codeSize: null,
    userId: input.userId,
    licenseId: input.licenseId,
    hwidHash: input.hwidHash,
    last: null,
  }),
  initial: 'alive',
  states: {
    alive: {
      on: {
        BEAT: [
          {
            guard: 'accepted',
            actions: assign(({ context, event }) =>
              acceptedChanges(context, event.beat, verdictOf(context, event.beat) as Accepted),
            ),
          },
          // Wrong, stale or malformed token, or a replay: refused without moving anything (docs/protocol.md 11.13).
          {
            guard: 'rejected',
            actions: assign(({ context, event }) => ({ last: verdictOf(context, event.beat) as BeatVerdict })),
          },
          {
            target: 'killed',
            actions: assign(({ context, event }) => ({ last: verdictOf(context, event.beat) as BeatVerdict })),
          },
        ],
        STOP: [
          { guard: 'tokenMatches', target: 'closed', actions: assign({ last: { kind: 'stopped' } }) },
          { actions: assign({ last: { kind: 'stop_refused' } }) },
        ],
        KILL: {
          target: 'killed',
          actions: assign(({ event }) => ({ last: { kind: 'killed' as const, reason: event.reason } })),
        },
      },
    },
    killed: { type: 'final' },
    closed: { type: 'final' },
  },
});
