// What the air-gapped tests share: requests as an SDK writes them (docs/air-gapped.md), and payloads of
// signed files checked under the server's published key.
import { createPublicKey, randomBytes, verify } from 'node:crypto';
import type { Api } from '../../helpers/http.js';

export function activationRequest(
  appId: string,
  key: string,
  hwid: string,
  o: { nonce?: string; extra?: Record<string, unknown> } = {},
): { request: string; nonce: string } {
  const nonce = o.nonce ?? randomBytes(16).toString('base64url');
  const body = { v: 1, app_id: appId, key, hwid, nonce, created_at: new Date().toISOString(), ...o.extra };
  return { request: `kwreq1.${Buffer.from(JSON.stringify(body), 'utf8').toString('base64url')}`, nonce };
}

/** The payload of a `kwlic1.` or `kwpool1.` text whose signature verifies under the published key it names. */
export async function verifiedPayload(api: Api, text: string, tag: string): Promise<Record<string, any>> {
  const [prefix, payloadB64, sigB64] = text.split('.') as [string, string, string];
  if (prefix !== tag) throw new Error(`not ${tag}: ${text.slice(0, 20)}`);
  const payload = JSON.parse(Buffer.from(payloadB64, 'base64url').toString('utf8'));
  const keys = (await api.get('/api/client/keys')).body.keys as { kid: string; public_key: string }[];
  const pub = keys.find((k) => k.kid === payload.kid);
  if (!pub) throw new Error(`unknown kid ${payload.kid}`);
  const spki = Buffer.concat([Buffer.from('302a300506032b6570032100', 'hex'), Buffer.from(pub.public_key, 'base64')]);
  const ok = verify(
    null,
    Buffer.from(`${tag}.${payloadB64}`, 'ascii'),
    createPublicKey({ key: spki, format: 'der', type: 'spki' }),
    Buffer.from(sigB64, 'base64url'),
  );
  if (!ok) throw new Error('signature does not verify');
  return payload;
}

/** The base64 public key GET /api/client/keys names first (the one that signs today). */
export async function publicKey(api: Api): Promise<string> {
  return (await api.get('/api/client/keys')).body.keys[0].public_key;
}
