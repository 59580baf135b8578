// The per-application client archive (SPEC: GET /apps/{id}/sdk/{lang} streams
// svc_sdk_python.zip, svc_sdk_csharp.zip or svc_sdk_cpp.zip). It carries the application's
// client configuration (api_key, api_secret for request signing, version, the response-signing
// public keys to pin) and the wire-protocol reference the language clients implement.
import { strToU8, zipSync } from 'fflate';
import type { Application } from '../db/entities/index.js';
import type { ResponseSigningKey } from '../secrets.js';

export const SDK_LANGS = ['python', 'csharp', 'cpp'] as const;
export type SdkLang = (typeof SDK_LANGS)[number];

export function isSdkLang(v: string): v is SdkLang {
  return (SDK_LANGS as readonly string[]).includes(v);
}

export function sdkFileName(lang: SdkLang): string {
  return `svc_sdk_${lang}.zip`;
}

export function sdkArchive(lang: SdkLang, app: Application, keys: readonly ResponseSigningKey[]): Buffer {
  const config = {
    app_name: app.name,
    api_key: app.apiKey,
    api_secret: app.apiSecret,
    version: app.version,
    require_signature: app.requireSignature,
    response_keys: keys.map((k) => ({ kid: k.kid, alg: 'Ed25519', public_key: k.publicKey.toString('base64') })),
  };
  const readme = `# Keywarden client configuration for ${app.name} (${lang})

keywarden.json holds what a ${lang} client of this application needs:
- api_key: sent to POST /api/client/init;
- api_secret: signs every request when require_signature is on (keep it inside the binary);
- response_keys: the Ed25519 public keys every response signature must verify with (pin them).

Wire protocol (all POST, JSON):
1. init {api_key, version} -> {session}
2. register / login / license with {session, hwid, ...}
3. heartbeat/start {session, system_id} -> {token, beat_interval, proof}; then
   heartbeat {session, token, system_id, beat_index, code_hash} every beat_interval seconds.

Request signature (when required):
  X-Timestamp: unix seconds, X-Nonce: 16-64 of [A-Za-z0-9_-] (fresh per call),
  X-Signature: hex(HMAC-SHA256(api_secret, "POST\\n" + path + "\\n" + ts + "\\n" + nonce + "\\n" + hex(sha256(body))))
Response signature (always verify):
  base64(Ed25519(kid key, "kw1\\n" + kid + "\\nPOST\\n" + path + "\\n" + status + "\\n" + X-Response-Timestamp + "\\n" + your X-Nonce + "\\n" + hex(sha256(body))))
  Refuse unsigned responses, unknown kids, timestamps more than 300 s off and failed verifications.
`;
  return Buffer.from(zipSync({
    [`svc_sdk_${lang}/README.md`]: strToU8(readme),
    [`svc_sdk_${lang}/keywarden.json`]: strToU8(JSON.stringify(config, null, 2) + '\n'),
  }, { level: 6, mtime: new Date('2026-01-01T00:00:00Z') }));
}
