// A minimal RFC 6455 WebSocket client on node:http/https (Node 18 has no WebSocket, and this
// package has no dependencies): the upgrade, masked client frames, fragmented and control frames
// (pings are answered), a size cap, and one 'close' event with the peer's code or 1006.
import { EventEmitter } from 'node:events';
import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const MAX_MESSAGE = 1 << 20;

export type UpgradeResult =
  | { kind: 'open'; socket: WebSocketClient }
  /** The server answered HTTP instead of switching protocols. */
  | { kind: 'refused'; status: number; headers: Record<string, string>; body: Buffer };

/** Events: 'message' (data: Buffer, isBinary: boolean), 'close' (code: number, reason: string). */
export class WebSocketClient extends EventEmitter {
  private buf: Buffer = Buffer.alloc(0);
  private fragments: Buffer[] = [];
  private fragmentBinary = false;
  private closeSent = false;
  private closed = false;
  /** Messages parsed before start() (the server may send right behind its 101). */
  private held: [Buffer, boolean][] | undefined = [];
  private heldClose: [number, string] | undefined;

  constructor(
    private readonly socket: Socket,
    head: Buffer,
  ) {
    super();
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('close', () => this.finish(1006, ''));
    socket.on('error', () => this.finish(1006, ''));
    if (head.length > 0) this.onData(head);
  }

  /** Delivers the messages held since the upgrade, then every later one, as 'message' events. */
  start(): void {
    const held = this.held ?? [];
    this.held = undefined;
    for (const [m, binary] of held) this.emit('message', m, binary);
    if (this.heldClose) this.emit('close', ...this.heldClose);
  }

  get isOpen(): boolean {
    return !this.closed && !this.closeSent;
  }

  send(data: Uint8Array | string, binary = true): boolean {
    if (!this.isOpen) return false;
    this.frame(binary ? 0x2 : 0x1, typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data));
    return true;
  }

  /** Sends a close frame and ends the connection. */
  close(code = 1000, reason = ''): void {
    if (this.closed) return;
    if (!this.closeSent) {
      const r = Buffer.from(reason, 'utf8').subarray(0, 123);
      const p = Buffer.alloc(2 + r.length);
      p.writeUInt16BE(code, 0);
      r.copy(p, 2);
      this.frame(0x8, p);
      this.closeSent = true;
    }
    this.socket.end();
    setTimeout(() => this.socket.destroy(), 1000).unref();
    this.finish(code, reason);
  }

  /** Drops the connection without a close frame. */
  terminate(): void {
    this.socket.destroy();
    this.finish(1006, '');
  }

  /** Keeps the process alive only while the caller wants it to. */
  unref(): void {
    this.socket.unref();
  }

  private frame(opcode: number, payload: Buffer): void {
    const len = payload.length;
    const head = len < 126 ? Buffer.alloc(2) : len < 65536 ? Buffer.alloc(4) : Buffer.alloc(10);
    head[0] = 0x80 | opcode;
    if (len < 126) head[1] = 0x80 | len;
    else if (len < 65536) {
      head[1] = 0x80 | 126;
      head.writeUInt16BE(len, 2);
    } else {
      head[1] = 0x80 | 127;
      head.writeBigUInt64BE(BigInt(len), 2);
    }
    const mask = randomBytes(4);
    const masked = Buffer.allocUnsafe(len);
    for (let i = 0; i < len; i++) masked[i] = payload[i]! ^ mask[i & 3]!;
    this.socket.write(Buffer.concat([head, mask, masked]));
  }

  private onData(d: Buffer): void {
    this.buf = this.buf.length === 0 ? d : Buffer.concat([this.buf, d]);
    for (;;) {
      if (this.buf.length < 2) return;
      const b0 = this.buf[0]!;
      const b1 = this.buf[1]!;
      if (b1 & 0x80) return this.fail(1002, 'masked frame from the server');
      let len = b1 & 0x7f;
      let off = 2;
      if (len === 126) {
        if (this.buf.length < 4) return;
        len = this.buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (this.buf.length < 10) return;
        const big = this.buf.readBigUInt64BE(2);
        if (big > BigInt(MAX_MESSAGE)) return this.fail(1009, 'message too big');
        len = Number(big);
        off = 10;
      }
      if (len > MAX_MESSAGE) return this.fail(1009, 'message too big');
      if (this.buf.length < off + len) return;
      const payload = this.buf.subarray(off, off + len);
      this.buf = this.buf.subarray(off + len);
      this.onFrame((b0 & 0x80) !== 0, b0 & 0x0f, Buffer.from(payload));
      if (this.closed) return;
    }
  }

  private onFrame(fin: boolean, opcode: number, payload: Buffer): void {
    switch (opcode) {
      case 0x0: // continuation
      case 0x1:
      case 0x2: {
        if (opcode !== 0x0) {
          this.fragments = [];
          this.fragmentBinary = opcode === 0x2;
        }
        this.fragments.push(payload);
        if (this.fragments.reduce((n, f) => n + f.length, 0) > MAX_MESSAGE) return this.fail(1009, 'message too big');
        if (!fin) return;
        const message = Buffer.concat(this.fragments);
        this.fragments = [];
        if (this.held) this.held.push([message, this.fragmentBinary]);
        else this.emit('message', message, this.fragmentBinary);
        return;
      }
      case 0x8: {
        const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
        const reason = payload.subarray(2).toString('utf8');
        if (!this.closeSent) {
          this.frame(0x8, payload.subarray(0, 2));
          this.closeSent = true;
        }
        this.socket.end();
        this.finish(code, reason);
        return;
      }
      case 0x9:
        if (this.isOpen) this.frame(0xa, payload);
        return;
      case 0xa:
        return;
      default:
        this.fail(1002, `unknown opcode ${opcode}`);
    }
  }

  private fail(code: number, reason: string): void {
    this.close(code, reason);
  }

  private finish(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    if (this.held) this.heldClose = [code, reason];
    else this.emit('close', code, reason);
  }
}

/** Opens `url` (http: or https:) as a WebSocket. Rejects on a network error or timeout. */
export function openWebSocket(url: string, headers: Record<string, string>, timeoutMs: number): Promise<UpgradeResult> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const key = randomBytes(16).toString('base64');
    const mod = target.protocol === 'https:' ? https : http;
    let settled = false;
    const done = (err: Error | undefined, r?: UpgradeResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (err) {
        req.destroy();
        reject(err);
      } else resolve(r!);
    };
    const req = mod.request({
      host: target.hostname,
      port: target.port || (target.protocol === 'https:' ? 443 : 80),
      path: `${target.pathname}${target.search}`,
      method: 'GET',
      agent: false,
      headers: {
        ...headers,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': key,
      },
    });
    const timer = setTimeout(() => done(new Error(`no upgrade within ${timeoutMs} ms`)), timeoutMs);
    req.on('upgrade', (res: http.IncomingMessage, socket: Socket, head: Buffer) => {
      const accept = createHash('sha1')
        .update(key + GUID)
        .digest('base64');
      if (res.statusCode !== 101 || res.headers['sec-websocket-accept'] !== accept) {
        socket.destroy();
        return done(new Error('the server did not accept the WebSocket handshake'));
      }
      done(undefined, { kind: 'open', socket: new WebSocketClient(socket, head) });
    });
    req.on('response', (res: http.IncomingMessage) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size <= 64 * 1024) chunks.push(c);
      });
      res.on('end', () => {
        const h: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers))
          if (v !== undefined) h[k.toLowerCase()] = Array.isArray(v) ? v.join(', ') : v;
        done(undefined, { kind: 'refused', status: res.statusCode ?? 0, headers: h, body: Buffer.concat(chunks) });
      });
      res.on('error', (err) => done(err));
    });
    req.on('error', (err) => done(err));
    req.end();
  });
}
