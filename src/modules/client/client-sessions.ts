// Client sessions (docs/protocol.md 2): 32 bytes base64url that live 24 hours. An unactivated session is
// a sealed token (session-token.ts) and nothing is stored for it, except the response key of one
// opened with an enc_key (unactivated-keys.ts, bounded by CLIENT_SESSION_LIMIT). A successful
// register/login/license stores the session's record in the coordinator (Redis in a cluster,
// memory in one process) and restarts its 24 hours (docs/spec.md "Activated-nonce window"); a stored
// record always wins over what the token says, so a deactivation after a killed heartbeat holds.
import { KEYS, pack, unpack } from '../../platform/cluster/names.js';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import { shardOf } from '../../platform/cluster/cluster-node.js';
import { SessionTokenCodec, type TokenClaims } from './session-token.js';
import { CompactKeyStore, CoordinatorKeyStore, type UnactivatedKeys } from './unactivated-keys.js';
import { normalizeHwid } from './hwid.js';

export const SESSION_TTL_MS = 24 * 3600 * 1000;
/** Coordinator keys of activated sessions (a single process checkpoints them across restarts). */
export const SESSION_KEY_PREFIX = KEYS.sessionPrefix;
const SESSION_FORMAT = /^[A-Za-z0-9_-]{43}$/;
/** A token dated this far ahead of our clock was not written by a worker of this deployment. */
const MAX_CLOCK_SKEW_MS = 5 * 60 * 1000;
/**
 * Tokens drawn per init at most, looking for one whose shard this worker owns (so a client that
 * keeps its connection on this worker has its heartbeats served here). With W workers each draw
 * hits with probability 1/W.
 */
export const AFFINITY_DRAWS = 16;
/** Records of activated sessions a worker of a cluster keeps for beats (docs/decisions.md). */
const RECENT_RECORDS = 100_000;

export interface ClientSession {
  appId: string;
  /**
   * The response key (docs/protocol.md 5: sha256(enc_key "-" api_secret), fixed at init), or null without
   * enc_key. A string is a record stored before sealed tokens: the enc_key itself.
   */
  encKey: Buffer | string | null;
  createdAt: number;
  /** Set by the first successful auth call; heartbeat/start needs it. */
  activatedAt: number | null;
  username: string | null;
  userId: string | null;
  licenseId: string | null;
  /**
   * The HWID (lower-cased, as devices store it) the activation was made from, so a removal of that
   * device ends this session and no other. Absent in records written before it was kept: unknown.
   */
  hwid?: string | null;
}

/** An unactivated session as its token describes it (nothing is stored for one). */
function unactivated(claims: TokenClaims, encKey: Buffer | null): ClientSession {
  return {
    appId: claims.appId,
    encKey,
    createdAt: claims.createdAt,
    activatedAt: null,
    username: null,
    userId: null,
    licenseId: null,
    hwid: null,
  };
}

/** What a session needs of this worker's cluster node: which shards it serves now. */
export interface ShardOwnership {
  readonly ownedShards: number;
  fenceOf(shard: number): number | undefined;
}

interface ClientSessionsDeps {
  coordinator: Coordinator;
  now: () => number;
  /** Secrets.sessionTokenKey: shared by every worker of the deployment. */
  tokenKey: Uint8Array;
  /** CLIENT_SESSION_LIMIT: unactivated enc_key sessions this worker keeps (or, with Redis, opened in 24 h). */
  limit: number;
  node?: ShardOwnership;
}

export class ClientSessions {
  private readonly coordinator: Coordinator;
  private readonly now: () => number;
  private readonly codec: SessionTokenCodec;
  /** Response keys of unactivated enc_key sessions. */
  readonly keys: UnactivatedKeys;
  /**
   * With Redis: the decoded records of activated sessions that beats looked up on this worker, oldest
   * first (at most RECENT_RECORDS). Only a beat takes its record from here (recentOrPeek, recentOrGet):
   * it needs of the record only that it exists and which app it is of, neither of which a later write
   * changes; the heartbeat itself is decided by its owner. One process has every record in memory.
   */
  private readonly recent: Map<string, ClientSession> | undefined;

  constructor(private readonly d: ClientSessionsDeps) {
    this.coordinator = d.coordinator;
    this.now = d.now;
    this.codec = new SessionTokenCodec(d.tokenKey);
    this.keys =
      d.coordinator.kind === 'local'
        ? new CompactKeyStore(d.limit, SESSION_TTL_MS, d.now)
        : new CoordinatorKeyStore(d.coordinator, d.limit, SESSION_TTL_MS, d.now);
    if (d.coordinator.kind !== 'local') this.recent = new Map();
  }

  private key(token: string): string {
    return KEYS.session(token);
  }

  /**
   * Opens an unactivated session: a sealed token, plus the response key when there is one.
   * Throws 503 `Service unavailable` (Retry-After) when the response keys are at their bound.
   */
  create(appId: string, encKey: Buffer | null): string | Promise<string> {
    const createdAt = this.now();
    // Without a response key nothing is stored: the sealed token is the whole session.
    return encKey ? this.createKeyed(appId, encKey, createdAt) : this.draw(appId, createdAt, false);
  }

  private async createKeyed(appId: string, encKey: Buffer, createdAt: number): Promise<string> {
    this.keys.ensureRoom();
    // A fingerprint clash in the key store is a 2^-64 event; the bound only guards the loop.
    for (let attempt = 0; attempt < 4; attempt++) {
      const token = this.draw(appId, createdAt, true);
      if (await this.keys.put(token, encKey, createdAt)) return token;
    }
    throw new Error('no free session token fingerprint in 4 draws');
  }

  /** A token, preferably on a shard this worker owns (bounded draws, then any). */
  private draw(appId: string, createdAt: number, keyed: boolean): string {
    // A worker that owns no shard yet (starting, leaving) has nothing to prefer.
    const node = this.d.node && this.d.node.ownedShards > 0 ? this.d.node : undefined;
    let token = this.codec.seal({ appId, createdAt, keyed });
    for (let i = 1; node && i < AFFINITY_DRAWS && node.fenceOf(shardOf(token)) === undefined; i++)
      token = this.codec.seal({ appId, createdAt, keyed });
    return token;
  }

  async get(token: unknown): Promise<ClientSession | null> {
    if (typeof token !== 'string' || !SESSION_FORMAT.test(token)) return null;
    const key = this.key(token);
    const peeked = this.coordinator.peek(key);
    const raw = peeked === undefined ? await this.coordinator.get(key) : peeked;
    if (raw) return unpack(raw) as ClientSession;
    const claims = this.claims(token);
    if (!claims) return null;
    if (!claims.keyed) return unactivated(claims, null);
    const encKey = await this.keys.get(token);
    return encKey ? unactivated(claims, encKey) : null;
  }

  /**
   * What get() would answer, when it is known without waiting (one process: the record is in
   * memory); undefined when only get() can tell (Redis, or an unactivated session's response key).
   */
  peek(token: unknown): ClientSession | null | undefined {
    if (typeof token !== 'string' || !SESSION_FORMAT.test(token)) return null;
    const raw = this.coordinator.peek(this.key(token));
    if (raw === undefined) return undefined;
    if (raw) return unpack(raw) as ClientSession;
    const claims = this.claims(token);
    if (!claims) return null;
    return claims.keyed ? undefined : unactivated(claims, null);
  }

  /**
   * For a beat: the record a beat on this worker read while its activation lasts, else peek(). A
   * record is never deleted before its activation ends (deactivated, it expires with it), so a
   * remembered one exists in the store at least as long.
   */
  recentOrPeek(token: unknown): ClientSession | null | undefined {
    const hit = this.remembered(token);
    return hit ?? this.peek(token);
  }

  /** For a beat: recentOrPeek(), else get(), remembering an activated record. */
  async recentOrGet(token: unknown): Promise<ClientSession | null> {
    const hit = this.remembered(token);
    if (hit) return hit;
    const record = await this.get(token);
    const recent = this.recent;
    if (recent && record && this.isActivated(record)) {
      if (recent.size >= RECENT_RECORDS) recent.delete(recent.keys().next().value!);
      recent.set(token as string, record);
    }
    return record;
  }

  private remembered(token: unknown): ClientSession | undefined {
    const recent = this.recent;
    if (!recent || typeof token !== 'string') return undefined;
    const hit = recent.get(token);
    if (hit === undefined) return undefined;
    if (this.isActivated(hit)) return hit;
    recent.delete(token);
    return undefined;
  }

  /** The claims of a sealed token this deployment wrote, inside its 24 hours; null otherwise. */
  private claims(token: string): TokenClaims | null {
    const claims = this.codec.open(token);
    if (!claims) return null;
    const now = this.now();
    if (now - claims.createdAt >= SESSION_TTL_MS || claims.createdAt - now > MAX_CLOCK_SKEW_MS) return null;
    return claims;
  }

  async activate(
    token: string,
    s: ClientSession,
    who: { username?: string; userId?: string; licenseId?: string; hwid: string },
  ): Promise<ClientSession> {
    const next: ClientSession = {
      ...s,
      activatedAt: this.now(),
      username: who.username ?? null,
      userId: who.userId ?? null,
      licenseId: who.licenseId ?? null,
      hwid: normalizeHwid(who.hwid),
    };
    await this.coordinator.set(this.key(token), pack(next), SESSION_TTL_MS);
    this.recent?.delete(token);
    return next;
  }

  /** A killed heartbeat ends the activation: the client must authenticate again. */
  async deactivate(token: string, s: ClientSession): Promise<void> {
    const next: ClientSession = { ...s, activatedAt: null };
    await this.coordinator.set(
      this.key(token),
      pack(next),
      Math.max(1, (s.activatedAt ?? s.createdAt) + SESSION_TTL_MS - this.now()),
    );
    this.recent?.delete(token);
  }

  /** True while the activation is inside the 24-hour window. */
  isActivated(s: ClientSession): boolean {
    return s.activatedAt !== null && this.now() - s.activatedAt <= SESSION_TTL_MS;
  }
}
