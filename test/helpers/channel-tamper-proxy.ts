// A TCP proxy in front of a real server for realtime-channel refusal tests. Plain HTTP connections
// pass through untouched; on a WebSocket upgrade to /api/client/ws it parses the server's frames
// (unmasked, RFC 6455) and spoils them in one precise way per mode:
//   hello       one byte of the hello's signature flipped                       -> bad_signature
//   forge       the 2nd server frame after the hello gets one payload bit flipped -> bad_mac
//   swap        the 2nd and 3rd server frames after the hello change places       -> out_of_order
//   inject      on the 2nd connection, the 2nd frame of the 1st connection is sent right after
//               the hello (a frame replayed from another connection)            -> bad_mac
//   absent      the upgrade is sent to another path, so the server answers 404   -> REST only
//   drop        the 1st connection is cut after the 3rd frame following the hello -> reconnect
//   pass        nothing spoiled
// Modes act on the first channel connection (inject: on the second) and pass later ones through.
// Every request gets an X-Forwarded-For of this proxy's own (the servers trust 127.0.0.1), so tests
// through it never spend the rate-limit budget of direct calls; plain requests are made the last of
// their connection, so a keep-alive client's next request carries it too.
import net from 'node:net';

export type ChannelTamperMode = 'hello' | 'forge' | 'swap' | 'inject' | 'absent' | 'drop' | 'pass';

let proxySeq = 0;

export interface ChannelTamperProxy {
  readonly url: string;
  /** Channel connections seen so far. */
  readonly channels: number;
  close(): Promise<void>;
}

function frameAt(buf: Buffer): { end: number; payloadStart: number; opcode: number } | undefined {
  if (buf.length < 2) return undefined;
  let len = buf[1]! & 0x7f;
  let off = 2;
  if (len === 126) {
    if (buf.length < 4) return undefined;
    len = buf.readUInt16BE(2);
    off = 4;
  } else if (len === 127) {
    if (buf.length < 10) return undefined;
    len = Number(buf.readBigUInt64BE(2));
    off = 10;
  }
  if (buf.length < off + len) return undefined;
  return { end: off + len, payloadStart: off, opcode: buf[0]! & 0x0f };
}

export async function startChannelTamperProxy(
  targetBase: string,
  mode: ChannelTamperMode,
): Promise<ChannelTamperProxy> {
  const target = new URL(targetBase);
  const sockets = new Set<net.Socket>();
  let channels = 0;
  let recorded: Buffer | undefined;
  const ip = `198.51.100.${100 + (proxySeq++ % 150)}`;

  const server = net.createServer((client) => {
    sockets.add(client);
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(upstream);
    const kill = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', kill);
    upstream.on('error', kill);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());

    let first = true;
    let index = 0; // this connection's number among channel connections (1-based), 0: plain HTTP
    client.on('data', (d: Buffer) => {
      if (first) {
        first = false;
        let head = d.toString('latin1');
        if (/^GET \/api\/client\/ws[ ?]/.test(head)) {
          index = ++channels;
          if (mode === 'absent' && index === 1) head = head.replace('GET /api/client/ws', 'GET /api/client/wx');
        }
        // One request per connection: its headers are in this first chunk. A plain request is told
        // `Connection: close`, so a keep-alive client (C#'s HttpClient) opens a new connection for its
        // next one, and that one carries this proxy's address as well.
        let extra = `X-Forwarded-For: ${ip}\r\n`;
        if (index === 0) {
          head = head.replace(/\r\nConnection:[^\r]*/gi, '');
          extra += 'Connection: close\r\n';
        }
        d = Buffer.from(head.replace('\r\n', `\r\n${extra}`), 'latin1');
      }
      upstream.write(d);
    });

    // Server -> client: headers pass, then whole frames, counted (the hello is frame 0).
    let headerDone = false;
    let pending = Buffer.alloc(0);
    let n = 0;
    let held: Buffer | undefined;
    let firstAnswer = true;
    upstream.on('data', (d: Buffer) => {
      if (index === 0 && firstAnswer) {
        // The answer says so too: the client does not try to reuse the connection.
        firstAnswer = false;
        const text = d.toString('latin1');
        const end = text.indexOf('\r\n\r\n');
        if (end > 0) {
          const head = text.slice(0, end).replace(/\r\nConnection:[^\r]*/gi, '') + '\r\nConnection: close';
          d = Buffer.from(head + text.slice(end), 'latin1');
        }
      }
      const tampered =
        mode === 'inject' ? index === 1 || index === 2 : mode !== 'absent' && mode !== 'pass' && index === 1;
      if (!tampered) return void client.write(d);
      pending = Buffer.concat([pending, d]);
      if (!headerDone) {
        const end = pending.indexOf('\r\n\r\n');
        if (end < 0) return;
        client.write(pending.subarray(0, end + 4));
        pending = pending.subarray(end + 4);
        headerDone = true;
      }
      for (let f = frameAt(pending); f; f = frameAt(pending)) {
        let frame = Buffer.from(pending.subarray(0, f.end));
        pending = pending.subarray(f.end);
        const k = n++;
        if (mode === 'hello' && k === 0) {
          const text = frame.subarray(f.payloadStart).toString('utf8');
          const hello = JSON.parse(text) as { sig: string };
          const sig = Buffer.from(hello.sig, 'base64');
          sig[10]! ^= 0x01;
          const spoiled = Buffer.from(JSON.stringify({ ...hello, sig: sig.toString('base64') }));
          frame = Buffer.concat([frame.subarray(0, f.payloadStart), spoiled]); // same length: base64 of 64 bytes
        }
        if (mode === 'forge' && k === 2) frame[frame.length - 2]! ^= 0x01;
        if (mode === 'inject' && index === 1 && k === 2) recorded = Buffer.from(frame);
        if (mode === 'inject' && index === 2 && k === 0) {
          // One write: the injected frame is already there when the client reads the hello, as a
          // frame queued right behind it would be, so every SDK judges it before using the connection.
          client.write(recorded ? Buffer.concat([frame, recorded]) : frame);
          continue;
        }
        if (mode === 'swap' && k === 2) {
          held = frame;
          continue;
        }
        client.write(frame);
        if (mode === 'swap' && k === 3 && held) client.write(held);
        if (mode === 'drop' && k === 3) return kill();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    get channels() {
      return channels;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
