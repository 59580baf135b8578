// The client hot path reads an application and its blacklist on every call. They are cached
// per worker for a short time (APP_CACHE_TTL_MS) and invalidated at once on dashboard writes,
// locally and, through the coordinator's `app.changed` channel, on every other worker.
import type { Coordinator, Unsubscribe } from '../../platform/cluster/coordinator.js';
import type { SessionOverflow } from '../../platform/db/entities/index.js';
import { CHANNELS } from '../../platform/cluster/names.js';
import { IpRangeSet } from '../../platform/http/ip-address.js';

/** The fields of an application the client hot path needs (the apps module reads them in one indexed query). */
export interface ClientAppRow {
  id: string;
  owner_id: string;
  name: string;
  version: string;
  enabled: boolean;
  disabled_message: string;
  keys_paused: boolean;
  hwid_lock: boolean;
  require_signature: boolean;
  injection_detection: boolean;
  require_heartbeat: boolean;
  force_update: boolean;
  update_url: string;
  update_message: string;
  force_encryption: boolean;
  hash_check: boolean;
  expected_binary_hash: string;
  allowed_hashes: string[];
  heartbeat_interval: number;
  max_sessions: number;
  session_overflow: SessionOverflow;
  api_secret: string;
  max_devices: number;
  trial_hours: number;
  trial_level: number;
  offline_days: number;
  grace_hours: number;
}

/** The apps module's reads behind the cache: ports compose.ts fills. */
interface ClientAppSource {
  findForClientByApiKey(apiKey: string): Promise<ClientAppRow | undefined>;
  findForClientById(id: string): Promise<ClientAppRow | undefined>;
}

const APP_CACHE_TTL_MS = 2_000;
/** api_keys are 32 lower-case hex characters (randomHex(16)); anything else cannot name an app. */
const API_KEY_FORMAT = /^[0-9a-f]{32}$/;
/** Lookups by api_key are remembered, misses included; a flood of random keys must not grow memory. */
const MAX_API_KEY_ENTRIES = 10_000;
const CHANNEL = CHANNELS.appChanged;

export interface CachedApp {
  row: ClientAppRow;
  /** Addresses and CIDR ranges: `has(ip)` costs a set probe per distinct prefix length. */
  blockedIps: Pick<IpRangeSet, 'has'>;
  blockedHwids: ReadonlySet<string>;
}

interface Slot {
  value: CachedApp | null;
  at: number;
}

export class ClientAppCache {
  private readonly byId = new Map<string, Slot>();
  private readonly idByApiKey = new Map<string, { id: string | null; at: number }>();
  private unsubscribe: Unsubscribe | undefined;
  private readonly changeListeners = new Set<(appId: string) => void>();

  constructor(
    private readonly apps: ClientAppSource,
    private readonly blacklist: { values(appId: string): Promise<{ type: string; value: string }[]> },
    private readonly coordinator: Coordinator,
    private readonly now: () => number,
  ) {}

  async start(): Promise<void> {
    this.unsubscribe = await this.coordinator.subscribe(CHANNEL, (msg) => this.drop(msg.toString()));
  }

  async stop(): Promise<void> {
    await this.unsubscribe?.();
  }

  /** Forgets an app here and tells every other worker to. */
  async invalidate(appId: string): Promise<void> {
    this.drop(appId);
    await this.coordinator.publish(CHANNEL, Buffer.from(appId));
  }

  /** Called with the app's id whenever it changes (here or on another worker), after the cache dropped it. */
  onChange(listener: (appId: string) => void): () => void {
    this.changeListeners.add(listener);
    return () => this.changeListeners.delete(listener);
  }

  private drop(appId: string): void {
    this.byId.delete(appId);
    for (const [k, v] of this.idByApiKey) if (v.id === appId) this.idByApiKey.delete(k);
    for (const l of this.changeListeners) l(appId);
  }

  /** The app as getByApiKey would answer it from the cache without waiting; undefined when it must be loaded. */
  peekByApiKey(apiKey: string): CachedApp | null | undefined {
    if (!API_KEY_FORMAT.test(apiKey)) return null;
    const hit = this.idByApiKey.get(apiKey);
    if (!hit || this.now() - hit.at >= APP_CACHE_TTL_MS) return undefined;
    return hit.id ? this.peekById(hit.id) : null;
  }

  async getByApiKey(apiKey: string): Promise<CachedApp | null> {
    if (!API_KEY_FORMAT.test(apiKey)) return null;
    const hit = this.idByApiKey.get(apiKey);
    const now = this.now();
    if (hit && now - hit.at < APP_CACHE_TTL_MS) return hit.id ? this.getById(hit.id) : null;
    const row = await this.apps.findForClientByApiKey(apiKey);
    if (this.idByApiKey.size >= MAX_API_KEY_ENTRIES) this.idByApiKey.clear();
    this.idByApiKey.set(apiKey, { id: row?.id ?? null, at: now });
    if (!row) return null;
    const value = await this.load(row);
    this.byId.set(row.id, { value, at: now });
    return value;
  }

  /** The app as getById would answer it from the cache without waiting; undefined when it must be loaded. */
  peekById(id: string): CachedApp | null | undefined {
    const hit = this.byId.get(id);
    return hit && this.now() - hit.at < APP_CACHE_TTL_MS ? hit.value : undefined;
  }

  async getById(id: string): Promise<CachedApp | null> {
    const hit = this.peekById(id);
    if (hit !== undefined) return hit;
    const now = this.now();
    const row = await this.apps.findForClientById(id);
    const value = row ? await this.load(row) : null;
    this.byId.set(id, { value, at: now });
    return value;
  }

  private async load(row: ClientAppRow): Promise<CachedApp> {
    const entries = await this.blacklist.values(row.id);
    const blockedIps = new IpRangeSet();
    const blockedHwids = new Set<string>();
    for (const e of entries) (e.type === 'ip' ? blockedIps : blockedHwids).add(e.value);
    return { row, blockedIps, blockedHwids };
  }
}
