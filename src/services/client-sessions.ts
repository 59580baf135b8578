// Client sessions (PROTOCOL 2): 32 random bytes base64url, kept in the coordinator (Redis in a
// cluster, memory in one process) for 24 hours. A successful register/login/license activates
// the session and restarts its 24 hours (SPEC "Activated-nonce window").
import { pack, unpack } from 'msgpackr';
import type { Coordinator } from '../cluster/coordinator.js';
import { randomToken } from '../crypto/index.js';

export const SESSION_TTL_MS = 24 * 3600 * 1000;
const SESSION_FORMAT = /^[A-Za-z0-9_-]{43}$/;

export interface ClientSession {
  appId: string;
  encKey: string | null;
  createdAt: number;
  /** Set by the first successful auth call; heartbeat/start needs it. */
  activatedAt: number | null;
  username: string | null;
  userId: string | null;
  licenseId: string | null;
}

export class ClientSessions {
  constructor(
    private readonly coordinator: Coordinator,
    private readonly now: () => number,
  ) {}

  private key(token: string): string {
    return `sess:${token}`;
  }

  async create(appId: string, encKey: string | null): Promise<string> {
    const token = randomToken(32);
    const s: ClientSession = {
      appId,
      encKey,
      createdAt: this.now(),
      activatedAt: null,
      username: null,
      userId: null,
      licenseId: null,
    };
    await this.coordinator.set(this.key(token), pack(s), SESSION_TTL_MS);
    return token;
  }

  async get(token: unknown): Promise<ClientSession | null> {
    if (typeof token !== 'string' || !SESSION_FORMAT.test(token)) return null;
    const raw = await this.coordinator.get(this.key(token));
    return raw ? (unpack(raw) as ClientSession) : null;
  }

  async activate(
    token: string,
    s: ClientSession,
    who: { username?: string; userId?: string; licenseId?: string },
  ): Promise<ClientSession> {
    const next: ClientSession = {
      ...s,
      activatedAt: this.now(),
      username: who.username ?? null,
      userId: who.userId ?? null,
      licenseId: who.licenseId ?? null,
    };
    await this.coordinator.set(this.key(token), pack(next), SESSION_TTL_MS);
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
  }

  /** True while the activation is inside the 24-hour window. */
  isActivated(s: ClientSession): boolean {
    return s.activatedAt !== null && this.now() - s.activatedAt <= SESSION_TTL_MS;
  }
}
