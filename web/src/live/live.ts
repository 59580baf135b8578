// Live updates for one application (docs/protocol.md 9): the WebSocket /api/ws, authenticated by the
// kw_session cookie the browser sends with the upgrade. When the stream is down the feed says so,
// polls every 10 s, and reconnects with exponential backoff (1 s doubling to 30 s, with jitter).

export type LiveStatus = 'connecting' | 'live' | 'paused';

export interface LiveEvent {
  id: string;
  kind: string;
  app_id: string;
  at: string;
  data: Record<string, unknown>;
}

export interface LiveFeedOptions {
  appId: string;
  onEvent(e: LiveEvent): void;
  /** Refresh everything: while paused every `pollMs`, and once after a reconnect (events may have been missed). */
  onPoll(): void;
  onStatus(status: LiveStatus, retryAt: number | null): void;
  /** The server closed the stream because the session no longer grants access (close code 1008). */
  onRevoked?(reason: string): void;
  pollMs?: number;
  url?: string;
  /** How long a connection may take to confirm the subscription before it counts as down. */
  subscribeTimeoutMs?: number;
}

export const POLL_MS = 10_000;
/**
 * WebSocket close code of a stream whose session was revoked, disabled or signed out
 * (docs/operations.md, "Limits and what hostile input gets").
 */
export const POLICY_CLOSE = 1008;
const MAX_BACKOFF_MS = 30_000;

/** Delay before reconnect attempt `n` (0-based): 1 s, 2 s, 4 s ... 30 s, each 50-100 % of that. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const base = Math.min(MAX_BACKOFF_MS, 1000 * 2 ** attempt);
  return Math.round(base * (0.5 + random() / 2));
}

export function liveUrl(loc: Pick<Location, 'protocol' | 'host'> = location): string {
  return `${loc.protocol === 'https:' ? 'wss:' : 'ws:'}//${loc.host}/api/ws`;
}

export class LiveFeed {
  private ws: WebSocket | undefined;
  private attempts = 0;
  private stopped = false;
  private status: LiveStatus = 'connecting';
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private subscribeTimer: ReturnType<typeof setTimeout> | undefined;
  private everLive = false;

  constructor(private readonly o: LiveFeedOptions) {}

  start(): void {
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.subscribeTimer);
    clearInterval(this.pollTimer);
    const ws = this.ws;
    this.ws = undefined;
    ws?.close();
  }

  private setStatus(s: LiveStatus, retryAt: number | null = null): void {
    this.status = s;
    this.o.onStatus(s, retryAt);
  }

  private connect(): void {
    if (this.stopped) return;
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.o.url ?? liveUrl());
    } catch {
      this.down();
      return;
    }
    this.ws = ws;
    this.subscribeTimer = setTimeout(() => ws.close(), this.o.subscribeTimeoutMs ?? 5_000);
    ws.onopen = () => ws.send(JSON.stringify({ type: 'subscribe', app_id: this.o.appId }));
    ws.onmessage = (m) => {
      let frame: { type?: string; event?: LiveEvent; detail?: string };
      try {
        frame = JSON.parse(String(m.data)) as typeof frame;
      } catch {
        return;
      }
      if (frame.type === 'subscribed') {
        clearTimeout(this.subscribeTimer);
        const recovering = this.everLive || this.status === 'paused';
        this.attempts = 0;
        this.everLive = true;
        clearInterval(this.pollTimer);
        this.pollTimer = undefined;
        this.setStatus('live');
        if (recovering) this.o.onPoll();
      } else if (frame.type === 'event' && frame.event) {
        this.o.onEvent(frame.event);
      } else if (frame.type === 'error') {
        ws.close(); // e.g. the app is gone or no longer visible: treated as down, polling shows the truth
      }
    };
    ws.onclose = (e) => {
      clearTimeout(this.subscribeTimer);
      if (e.code === POLICY_CLOSE && this.ws === ws) this.o.onRevoked?.(e.reason);
      if (this.ws === ws) this.down();
    };
    ws.onerror = () => undefined; // a close follows
  }

  private down(): void {
    if (this.stopped) return;
    this.ws = undefined;
    const delay = backoffMs(this.attempts++);
    this.setStatus('paused', Date.now() + delay);
    this.pollTimer ??= setInterval(() => this.o.onPoll(), this.o.pollMs ?? POLL_MS);
    clearTimeout(this.reconnectTimer);
    this.reconnectTimer = setTimeout(() => this.connect(), delay);
  }
}
