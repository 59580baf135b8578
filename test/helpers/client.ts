// A test client for /api/client/*: sends a fresh X-Nonce on every call, signs requests when given
// the api_secret (docs/protocol.md 3) and verifies every response signature (docs/protocol.md 4) with node:crypto,
// an implementation independent of the server's sodium-native.
import {
  createHash,
  createHmac,
  createPublicKey,
  randomBytes,
  verify,
  createDecipheriv,
  type KeyObject,
} from 'node:crypto';

export interface ClientResponse<T = any> {
  status: number;
  body: T;
  raw: Buffer;
  headers: Headers;
}

export class ClientApi {
  private keys = new Map<string, KeyObject>();
  /** Set to sign every request with this api_secret. */
  secret: string | undefined;
  /** Headers merged into every request (e.g. X-Forwarded-For through a trusted proxy). */
  extraHeaders: Record<string, string> = {};
  /** Overrides for the next request's signature headers (negative tests). */
  tamper:
    | Partial<{ timestamp: string; nonce: string; signature: string; omit: 'timestamp' | 'nonce' | 'signature' }>
    | undefined;

  /** The time the client believes it is (a test whose server runs on a moved TestClock passes that clock's). */
  now: () => number = () => Date.now();

  constructor(readonly base: string) {}

  async loadKeys(): Promise<void> {
    const res = await fetch(`${this.base}/api/client/keys`);
    const body = (await res.json()) as { keys: { kid: string; alg: string; public_key: string }[] };
    for (const k of body.keys) {
      const x = Buffer.from(k.public_key, 'base64').toString('base64url');
      this.keys.set(k.kid, createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' }));
    }
  }

  async post<T = any>(path: string, body: unknown, opts: { rawBody?: string } = {}): Promise<ClientResponse<T>> {
    if (this.keys.size === 0) await this.loadKeys();
    const payload = Buffer.from(opts.rawBody ?? JSON.stringify(body));
    const nonce = this.tamper?.nonce ?? randomBytes(16).toString('base64url');
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'x-nonce': nonce,
      ...this.extraHeaders,
    };
    if (this.secret) {
      const ts = this.tamper?.timestamp ?? String(Math.floor(this.now() / 1000));
      const canonical = `POST\n${path}\n${ts}\n${nonce}\n${createHash('sha256').update(payload).digest('hex')}`;
      headers['x-timestamp'] = ts;
      headers['x-signature'] =
        this.tamper?.signature ?? createHmac('sha256', this.secret).update(canonical).digest('hex');
      if (this.tamper?.omit) delete headers[`x-${this.tamper.omit}`];
    }
    this.tamper = undefined;
    const res = await fetch(this.base + path, { method: 'POST', headers, body: payload });
    const raw = Buffer.from(await res.arrayBuffer());
    this.assertSigned('POST', path, res, raw, headers['x-nonce'] ?? '');
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString('utf8'));
    } catch {
      parsed = raw.toString('utf8');
    }
    return { status: res.status, body: parsed as T, raw, headers: res.headers };
  }

  /** Throws unless the response carries a valid Ed25519 signature over docs/protocol.md 4's message. */
  assertSigned(method: string, path: string, res: Response, raw: Buffer, nonce: string): void {
    const kid = res.headers.get('x-response-kid');
    const ts = res.headers.get('x-response-timestamp');
    const sig = res.headers.get('x-response-signature');
    if (!kid || !ts || !sig) throw new Error(`unsigned response ${res.status} on ${path}`);
    const key = this.keys.get(kid);
    if (!key) throw new Error(`unknown kid ${kid}`);
    if (Math.abs(Number(ts) - this.now() / 1000) > 300) throw new Error('stale response timestamp');
    const message = `kw1\n${kid}\n${method}\n${path}\n${res.status}\n${ts}\n${nonce}\n${createHash('sha256').update(raw).digest('hex')}`;
    if (!verify(null, Buffer.from(message), key, Buffer.from(sig, 'base64')))
      throw new Error(`bad response signature on ${path} (${res.status})`);
  }
}

/** docs/protocol.md 5, decrypted independently with node:crypto. */
export function decryptEnc(enc: string, encKey: string, apiSecret: string, initIv: string): unknown {
  const key = createHash('sha256').update(`${encKey}-${apiSecret}`).digest();
  const iv = createHash('sha256').update(initIv).digest().subarray(0, 16);
  const d = createDecipheriv('aes-256-cbc', key, iv);
  return JSON.parse(Buffer.concat([d.update(Buffer.from(enc, 'base64')), d.final()]).toString('utf8'));
}

export function hwid(n: number | string = 1): string {
  return `hwid-${String(n).padStart(8, '0')}`;
}
