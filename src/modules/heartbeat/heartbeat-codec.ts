// The one way heartbeat-session state crosses a process boundary (Redis hash on every accepted
// beat, restore after failover or handover, the liveness check of another worker). A versioned
// tuple: compact (no field names per session), and a version this code does not know is refused
// instead of being read as something else. Every persist and restore path goes through here.
// Version 2 appends hwidHash; a version 1 snapshot (written before a rolling upgrade) still decodes,
// as a session whose device is unknown (hwidHash null).
import { pack, unpack } from '../../platform/cluster/names.js';
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
  hwidHash: string | null,
];
/** Version 1: the same tuple without hwidHash. */
const V1_LENGTH = 16;
const V2_LENGTH = 17;

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
    c.hwidHash,
  ];
  return pack(t);
}

/** The context a snapshot describes (its last verdict is not state: null). Throws on an unknown version. */
export function decodeHeartbeat(raw: Buffer): HeartbeatContext {
  const t = unpack(raw) as unknown;
  const version = Array.isArray(t) ? t[0] : (t as { v?: unknown } | null)?.v;
  const known =
    Array.isArray(t) &&
    ((version === HEARTBEAT_SNAPSHOT_VERSION && t.length === V2_LENGTH) || (version === 1 && t.length === V1_LENGTH));
  if (!known) throw new UnknownSnapshotVersion(version);
  const [
    ,
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
    hwidHash = null,
  ] = t as Tuple;
  return {
    v: HEARTBEAT_SNAPSHOT_VERSION,
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
    hwidHash,
    last: null,
  };
}
