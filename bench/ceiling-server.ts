// Workload (a), the ceiling: a bare uWebSockets.js handler that parses the same heartbeat JSON
// and answers the same signed response Keywarden sends (new token, HMAC proof, Ed25519 response
// signature over docs/protocol.md 4's message) with no session, actor, gate or storage behind it.
import type * as Uws from 'uWebSockets.js';
import { loadUws } from '../src/platform/http/uws-loader.js';
import {
  ed25519Sign,
  hmacSha256Base64,
  randomBytes,
  randomHex,
  sha256Hex,
  signingKeyFromSeed,
} from '../src/platform/crypto/index.js';

// The same build the server would run with (the loader's choice), so the ratio compares like with like.
const uws = loadUws();
const key = signingKeyFromSeed(randomBytes(32));
const port = Number(process.env.PORT ?? 0);
let count = 0;

uws
  .App()
  .post('/api/client/heartbeat', (res, req) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const nonce = req.getHeader('x-nonce');
    const chunks: Buffer[] = [];
    res.onData((chunk, last) => {
      chunks.push(Buffer.from(chunk.slice(0)));
      if (!last) return;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        session: string;
        token: string;
        beat_index: number;
      };
      const newToken = `TT${randomHex(16)}`;
      const beatCount = ++count;
      const proof = hmacSha256Base64(
        body.token,
        `kwhb1\n${body.session}\n${body.beat_index}\n${newToken}\n${beatCount}`,
      );
      const out = Buffer.from(JSON.stringify({ success: true, new_token: newToken, beat_count: beatCount, proof }));
      const ts = String(Math.floor(Date.now() / 1000));
      const sig = ed25519Sign(
        Buffer.from(`kw1\nk1\nPOST\n/api/client/heartbeat\n200\n${ts}\n${nonce}\n${sha256Hex(out)}`),
        key.secretKey,
      ).toString('base64');
      if (aborted) return;
      res.cork(() => {
        res
          .writeStatus('200 OK')
          .writeHeader('Content-Type', 'application/json')
          .writeHeader('X-Response-Kid', 'k1')
          .writeHeader('X-Response-Timestamp', ts)
          .writeHeader('X-Response-Signature', sig)
          .end(out);
      });
    });
  })
  .any('/*', (res) => {
    res.writeStatus('404 Not Found').end();
  })
  .listen('127.0.0.1', port, (s) => {
    if (!s) process.exit(1);
    console.log(
      JSON.stringify({ msg: 'ceiling.listening', port: uws.us_socket_local_port(s as unknown as Uws.us_socket) }),
    );
  });
