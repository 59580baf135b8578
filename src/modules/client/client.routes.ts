// What every client route shares: its OpenAPI entry, the per-address limiters (docs/spec.md "Limits",
// docs/protocol.md 11.3), and the one route of the client API that needs no session: the public keys.
import type { TSchema } from '@sinclair/typebox';
import type { Coordinator } from '../../platform/cluster/coordinator.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';
import { signReply } from '../../platform/http/client-signing.js';
import type { Router, RouteDoc } from '../../platform/http/router.js';
import { jsonReply } from '../../platform/http/types.js';
import { addressLimiter, type RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';

export function clientDoc(summary: string, body: TSchema): RouteDoc {
  return { summary, tag: 'client', auth: 'client', body };
}

/**
 * Per IP, per endpoint, per minute. Alone, a compact in-process table (16 bytes an address,
 * bounded); in a cluster, Redis, shared by every worker.
 */
export type RequestLimiterFactory = (name: string, points: number) => RequestLimiter;

export function clientLimiter(coordinator: Coordinator, now: () => number): RequestLimiterFactory {
  return (name, points) => addressLimiter(coordinator, now, name, points);
}

interface ClientKeysRouteDeps {
  signingKey: () => ResponseSigningKey;
  publishedKeys: () => readonly ResponseSigningKey[];
  now: () => number;
}

export function clientKeysRoute(router: Router, { signingKey, publishedKeys, now }: ClientKeysRouteDeps): void {
  router.add({
    method: 'get',
    path: '/api/client/keys',
    doc: { summary: 'Response-signing public keys', tag: 'client', auth: 'none' },
    handler: async (req) =>
      signReply(
        jsonReply(200, {
          keys: publishedKeys().map((k) => ({
            kid: k.kid,
            alg: 'Ed25519',
            public_key: k.publicKey.toString('base64'),
          })),
        }),
        signingKey(),
        req.method,
        req.path,
        req.headers['x-nonce'] ?? '',
        now(),
      ),
  });
}
