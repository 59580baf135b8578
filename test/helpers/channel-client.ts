// A client of the realtime channel (docs/protocol.md "Realtime channel") written from that page
// alone with node:crypto and the `ws` package, independent of the server's sodium-native code: it
// verifies the signed hello, derives the keys, checks every frame's MAC and seq, and lets tests
// misbehave.
import {
  createHash,
  createHmac,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  timingSafeEqual,
  verify,
  type KeyObject,
} from 'node:crypto';
import WebSocket from 'ws';

export interface ChannelRefusal {
  status: number;
  body: any;
  headers: Record<string, string>;
}

export interface ServerMessage {
  seq: number;
  type: string;
  [k: string]: any;
}

export interface ConnectOptions {
  /** X-Forwarded-For (the test servers trust 127.0.0.1 as a proxy). */
  ip?: string;
  /** Signs the upgrade (docs/protocol.md 3) with this api_secret. */
  secret?: string;
  version?: string;
  /** Overrides of the upgrade's headers (negative tests); undefined deletes. */
  headers?: Record<string, string | undefined>;
  /** Use this X25519 key pair instead of a fresh one. */
  keyPair?: { publicKey: KeyObject; privateKey: KeyObject };
}

let keyCache: { base: string; keys: Map<string, KeyObject> } | undefined;
export async function responseKeys(base: string): Promise<Map<string, KeyObject>> {
  if (keyCache?.base === base) return keyCache.keys;
  const body = (await (await fetch(`${base}/api/client/keys`)).json()) as {
    keys: { kid: string; public_key: string }[];
  };
  const keys = new Map(
    body.keys.map((k) => [
      k.kid,
      createPublicKey({
        key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(k.public_key, 'base64').toString('base64url') },
        format: 'jwk',
      }),
    ]),
  );
  keyCache = { base, keys };
  return keys;
}

const sha256 = (b: string | Buffer) => createHash('sha256').update(b).digest();

export class ChannelClient {
  /** Verified messages not yet taken, in order. */
  private readonly inbox: ServerMessage[] = [];
  private readonly waiters: {
    match: (m: ServerMessage) => boolean;
    resolve: (m: ServerMessage) => void;
    reject: (e: Error) => void;
  }[] = [];
  private outSeq = 0;
  private inSeq = 0;
  /** Why the last frame was refused, if one was (`bad_mac`, `out_of_order`). */
  refused: string | undefined;
  /** The transport's last error (a reset, an invalid frame), if one came. */
  error: Error | undefined;
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Raw frames as received (for replay tests). */
  readonly rawFrames: Buffer[] = [];

  private constructor(
    readonly ws: WebSocket,
    readonly hello: Record<string, any>,
    readonly s2c: Buffer,
    readonly c2s: Buffer,
    readonly clientKey: string,
  ) {
    this.closed = new Promise((resolve) =>
      ws.once('close', (code, reason) => {
        for (const w of this.waiters.splice(0))
          w.reject(
            new Error(
              `channel closed ${code} ${reason.toString()}${this.refused ? ` (this client refused a frame: ${this.refused})` : ''}${this.error ? ` (${this.error.message})` : ''}`,
            ),
          );
        resolve({ code, reason: reason.toString() });
      }),
    );
    ws.on('message', (data: Buffer, isBinary) => this.receive(Buffer.from(data), isBinary));
    ws.on('error', (err) => (this.error = err));
  }

  /** Connects and completes the handshake; a refused upgrade resolves with its verified (signed) answer. */
  static async connect(base: string, session: string, o: ConnectOptions = {}): Promise<ChannelClient | ChannelRefusal> {
    const keys = await responseKeys(base);
    const kp = o.keyPair ?? generateKeyPairSync('x25519');
    const clientKey = kp.publicKey.export({ format: 'jwk' }).x!;
    const headers: Record<string, string> = { 'x-session': session, 'x-nonce': clientKey };
    if (o.ip) headers['x-forwarded-for'] = o.ip;
    if (o.version) headers['x-client-version'] = o.version;
    if (o.secret) {
      const ts = String(Math.floor(Date.now() / 1000));
      headers['x-timestamp'] = ts;
      headers['x-signature'] = createHmac('sha256', o.secret)
        .update(`GET\n/api/client/ws\n${ts}\n${clientKey}\n${sha256('').toString('hex')}`)
        .digest('hex');
    }
    for (const [k, v] of Object.entries(o.headers ?? {})) {
      if (v === undefined) delete headers[k];
      else headers[k] = v;
    }
    const nonce = headers['x-nonce'] ?? '';
    const ws = new WebSocket(`${base.replace(/^http/, 'ws')}/api/client/ws`, { headers });
    return new Promise((resolve, reject) => {
      ws.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const raw = Buffer.concat(chunks);
          const h: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h[k] = v;
          const kid = h['x-response-kid'] ?? '';
          const msg = `kw1\n${kid}\nGET\n/api/client/ws\n${res.statusCode}\n${h['x-response-timestamp']}\n${nonce}\n${sha256(raw).toString('hex')}`;
          const key = keys.get(kid);
          if (!key || !verify(null, Buffer.from(msg), key, Buffer.from(h['x-response-signature'] ?? '', 'base64'))) {
            return reject(new Error(`refusal ${res.statusCode} is not signed over our nonce: ${raw.toString()}`));
          }
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(raw.toString() || 'null'), headers: h });
        });
      });
      ws.once('error', reject);
      ws.once('message', (data: Buffer, isBinary) => {
        try {
          if (isBinary) throw new Error('hello must be a text frame');
          const hello = JSON.parse(data.toString('utf8'));
          const key = keys.get(hello.kid);
          if (!key) throw new Error(`unknown kid ${hello.kid}`);
          if (Math.abs(hello.ts - Date.now() / 1000) > 300) throw new Error('stale hello');
          const transcript = [
            'kwc1-hello',
            hello.kid,
            hello.ts,
            session,
            clientKey,
            hello.server_key,
            hello.conn,
            hello.beat_interval,
          ].join('\n');
          if (!verify(null, Buffer.from(transcript), key, Buffer.from(hello.sig, 'base64')))
            throw new Error('hello signature does not verify');
          const serverPub = createPublicKey({ key: { kty: 'OKP', crv: 'X25519', x: hello.server_key }, format: 'jwk' });
          const shared = diffieHellman({ privateKey: kp.privateKey, publicKey: serverPub });
          const okm = Buffer.from(hkdfSync('sha256', shared, sha256(transcript), Buffer.from('kwc1 keys'), 64));
          resolve(new ChannelClient(ws, hello, okm.subarray(0, 32), okm.subarray(32, 64), clientKey));
        } catch (err) {
          ws.terminate();
          reject(err as Error);
        }
      });
    });
  }

  private receive(frame: Buffer, isBinary: boolean): void {
    this.rawFrames.push(frame);
    const fail = (why: string) => {
      this.refused = why;
      this.ws.terminate();
    };
    if (!isBinary || frame.length <= 32) return fail('malformed');
    const payload = frame.subarray(32);
    const mac = createHmac('sha256', this.s2c).update(payload).digest();
    if (!timingSafeEqual(mac, frame.subarray(0, 32))) return fail('bad_mac');
    const m = JSON.parse(payload.toString('utf8')) as ServerMessage;
    if (m.seq !== this.inSeq + 1) return fail('out_of_order');
    this.inSeq = m.seq;
    const i = this.waiters.findIndex((w) => w.match(m));
    if (i >= 0) this.waiters.splice(i, 1)[0]!.resolve(m);
    else this.inbox.push(m);
  }

  /** The next verified message matching `match` (already received or yet to come). */
  next(match: string | ((m: ServerMessage) => boolean), timeoutMs = 5000): Promise<ServerMessage> {
    const fn = typeof match === 'string' ? (m: ServerMessage) => m.type === match : match;
    const i = this.inbox.findIndex(fn);
    if (i >= 0) return Promise.resolve(this.inbox.splice(i, 1)[0]!);
    return new Promise((resolve, reject) => {
      const w = {
        match: fn,
        resolve: (m: ServerMessage) => {
          clearTimeout(t);
          resolve(m);
        },
        reject: (e: Error) => {
          clearTimeout(t);
          reject(e);
        },
      };
      const t = setTimeout(() => {
        this.waiters.splice(this.waiters.indexOf(w), 1);
        reject(new Error(`no ${typeof match === 'string' ? match : 'matching'} message within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiters.push(w);
    });
  }

  /** Seals and sends one message with the next seq (or the given one). */
  send(msg: Record<string, unknown>, o: { seq?: number; key?: Buffer } = {}): number {
    const seq = o.seq ?? ++this.outSeq;
    const payload = Buffer.from(JSON.stringify({ seq, ...msg }));
    this.ws.send(
      Buffer.concat([
        createHmac('sha256', o.key ?? this.c2s)
          .update(payload)
          .digest(),
        payload,
      ]),
    );
    return seq;
  }

  /** One call; resolves with the reply's status and body. */
  async call(
    op: string,
    body: Record<string, unknown> = {},
  ): Promise<{ status: number; body: any; retry_after?: number }> {
    const seq = this.send({ type: 'call', op, body });
    const r = await this.next((m) => m.type === 'reply' && m.re === seq);
    return { status: r.status, body: r.body, ...(r.retry_after !== undefined ? { retry_after: r.retry_after } : {}) };
  }

  close(): void {
    this.ws.close();
  }
}

/** Connects, failing the test when the upgrade is refused. */
export async function openChannel(base: string, session: string, o: ConnectOptions = {}): Promise<ChannelClient> {
  const c = await ChannelClient.connect(base, session, o);
  if (!(c instanceof ChannelClient)) throw new Error(`channel refused: ${c.status} ${JSON.stringify(c.body)}`);
  return c;
}

/**
 * Connects and proves the channel outlived its open (a ping answered), connecting again when it was
 * closed abnormally (1006) before that: uWS may close a socket it upgraded inside cork right after the
 * hello (the server's `channel.closed_by_upgrade`), as an SDK would then reconnect. Nothing was read on
 * such a connection, so connecting again changes nothing on the server.
 */
export async function openLiveChannel(base: string, session: string, o: ConnectOptions = {}): Promise<ChannelClient> {
  for (let attempt = 1; ; attempt++) {
    const ch = await openChannel(base, session, o);
    ch.send({ type: 'ping' });
    const outcome = await Promise.race([ch.next('pong').then(() => 'live' as const), ch.closed]);
    if (outcome === 'live') return ch;
    if (outcome.code !== 1006 || attempt === 3) throw new Error(`channel closed ${outcome.code} at its open`);
  }
}
