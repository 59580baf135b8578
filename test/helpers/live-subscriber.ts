// A dashboard's live-update WebSocket (/api/ws) for tests: collects frames, lets a test await the
// next matching one, and tells when and how the server closed it.
import WebSocket from 'ws';
import { unpack } from 'msgpackr';

export class Subscriber {
  readonly frames: any[] = [];
  private waiters: { match: (f: any) => boolean; resolve: (f: any) => void }[] = [];
  /** Resolves with the close code once the socket is closed (by either side). */
  readonly closed: Promise<{ code: number; reason: string }>;
  private constructor(
    readonly ws: WebSocket,
    readonly msgpack: boolean,
  ) {
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      const frame = isBinary ? unpack(data) : JSON.parse(data.toString());
      this.frames.push(frame);
      this.waiters = this.waiters.filter((w) => (w.match(frame) ? (w.resolve(frame), false) : true));
    });
    this.closed = new Promise((resolve) =>
      ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    );
  }

  static open(
    base: string,
    token: string | undefined,
    protocol?: string,
    headers: Record<string, string> = {},
  ): Promise<Subscriber> {
    const all = { ...headers, ...(token ? { authorization: `Bearer ${token}` } : {}) };
    const ws = new WebSocket(`${base.replace('http', 'ws')}/api/ws`, protocol ? [protocol] : [], { headers: all });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new Subscriber(ws, protocol === 'msgpack')));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (d: Buffer) => {
          body += d.toString();
        });
        res.on('end', () => reject(new Error(`upgrade refused: ${res.statusCode} ${body}`)));
      });
      ws.once('error', reject);
    });
  }

  next(match: (f: any) => boolean): Promise<any> {
    const seen = this.frames.find(match);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => this.waiters.push({ match, resolve }));
  }

  /** Resolves once `n` frames have matched. */
  nth(match: (f: any) => boolean, n: number): Promise<any> {
    let seen = 0;
    return this.next((f) => match(f) && ++seen >= n);
  }

  async subscribe(appId: string): Promise<any> {
    this.ws.send(JSON.stringify({ type: 'subscribe', app_id: appId }));
    return this.next((f) => f.app_id === appId && (f.type === 'subscribed' || f.type === 'error'));
  }

  events(kind?: string): any[] {
    return this.frames.filter((f) => f.type === 'event' && (kind === undefined || f.event.kind === kind));
  }

  close() {
    this.ws.close();
  }
}
