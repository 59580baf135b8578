// The one way heartbeat-session state crosses a process boundary (Redis hash on every accepted
// beat, restore after failover or handover, the liveness check of another worker). A versioned
// tuple: compact (no field names per session), and a version this code does not know is refused
// instead of being read as something else. Every persist and restore path goes through here.
import { pack, unpack } from 'msgpackr';
import { HEARTBEAT_SNAPSHOT_VERSION, type HeartbeatContext } from './heartbeat.machine.js';

export class UnknownSnapshotVersion extends Error {
  constructor(readonly version: unknown) {
    super(`heartbeat snapshot version ${String(version)} is not known to this build`);
  }
}

type Tuple = [
  v: number,
  appId: string,
  session: string,
  token: string,
  systemId: string,
  beatInterval: number,
  lastBeatIndex: number,
  beatCount: number,
  warnings: number,
  lastBeatAt: number,
  startedAt: number,
  expiresAt: number,
  codeHash: string | null,
  codeSize: number | null,
  userId: string | null,
  licenseId: string | null,
];

export function encodeHeartbeat(c: HeartbeatContext): Buffer {
  const t: Tuple = [
    HEARTBEAT_SNAPSHOT_VERSION,
    c.appId,
    c.session,
    c.token,
    c.systemId,
    c.beatInterval,
    c.lastBeatIndex,
    c.beatCount,
    c.warnings,
    c.lastBeatAt,
    c.startedAt,
    c.expiresAt,
    c.codeHash,
    c.codeSize,
    c.userId,
    c.licenseId,
  ];
  return pack(t);
}

/** The context a snapshot describes (its last verdict is not state: null). Throws on an unknown version. */
export function decodeHeartbeat(raw: Buffer): HeartbeatContext {
  const t = unpack(raw) as unknown;
  const version = Array.isArray(t) ? t[0] : (t as { v?: unknown } | null)?.v;
  if (version !== HEARTBEAT_SNAPSHOT_VERSION || !Array.isArray(t) || t.length !== 16)
    throw new UnknownSnapshotVersion(version);
  const [
    v,
    appId,
    session,
    token,
    systemId,
    beatInterval,
    lastBeatIndex,
    beatCount,
    warnings,
    lastBeatAt,
    startedAt,
    expiresAt,
    codeHash,
    codeSize,
    userId,
    licenseId,
  ] = t as Tuple;
  return {
    v,
    appId,
    session,
    token,
    systemId,
    beatInterval,
    lastBeatIndex,
    beatCount,
    warnings,
    lastBeatAt,
    startedAt,
    expiresAt,
    codeHash,
    codeSize,
    userId,
    licenseId,
    last: null,
  };
}
