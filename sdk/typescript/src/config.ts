// keywarden.json, format 1 (sdk/vectors/README.md): what the dashboard's SDK zip carries.
import fs from 'node:fs';

export interface ResponseKey {
  kid: string;
  alg: 'Ed25519';
  /** base64 of the 32-byte Ed25519 public key. */
  public_key: string;
}

export interface KeywardenConfig {
  format: 1;
  base_url: string;
  app_name?: string;
  api_key: string;
  version?: string;
  response_keys: ResponseKey[];
  /** Present only when the application requires signed requests. */
  api_secret?: string;
  /** The application's id: an offline license file must name it (docs/protocol.md 12.5). */
  app_id?: string;
}

function fail(msg: string): never {
  throw new TypeError(`keywarden config: ${msg}`);
}

/** Checks a parsed keywarden.json; unknown fields are ignored. */
export function parseConfig(raw: unknown): KeywardenConfig {
  if (raw === null || typeof raw !== 'object') fail('not a JSON object');
  const c = raw as Record<string, unknown>;
  if (c.format !== 1) fail(`unsupported format ${JSON.stringify(c.format)} (this SDK reads format 1)`);
  if (typeof c.base_url !== 'string' || !/^https?:\/\//.test(c.base_url)) fail('base_url must be an http(s) URL');
  if (typeof c.api_key !== 'string' || c.api_key === '') fail('api_key missing');
  if (c.version !== undefined && typeof c.version !== 'string') fail('version must be a string');
  if (c.api_secret !== undefined && typeof c.api_secret !== 'string') fail('api_secret must be a string');
  if (c.app_id !== undefined && (typeof c.app_id !== 'string' || c.app_id === ''))
    fail('app_id must be a non-empty string');
  if (!Array.isArray(c.response_keys) || c.response_keys.length === 0) fail('response_keys must list at least one key');
  const keys = c.response_keys.map((k: unknown) => {
    const o = (k ?? {}) as Record<string, unknown>;
    if (typeof o.kid !== 'string' || o.kid === '') fail('a response key has no kid');
    if (o.alg !== undefined && o.alg !== 'Ed25519') fail(`key ${o.kid}: unsupported alg ${String(o.alg)}`);
    if (typeof o.public_key !== 'string' || Buffer.from(o.public_key, 'base64').length !== 32)
      fail(`key ${o.kid}: public_key must be base64 of 32 bytes`);
    return { kid: o.kid, alg: 'Ed25519' as const, public_key: o.public_key };
  });
  return {
    format: 1,
    base_url: c.base_url,
    api_key: c.api_key,
    response_keys: keys,
    ...(typeof c.app_name === 'string' ? { app_name: c.app_name } : {}),
    ...(typeof c.version === 'string' ? { version: c.version } : {}),
    ...(typeof c.api_secret === 'string' && c.api_secret !== '' ? { api_secret: c.api_secret } : {}),
    ...(typeof c.app_id === 'string' ? { app_id: c.app_id } : {}),
  };
}

export function loadConfigFile(path: string): KeywardenConfig {
  let text: string;
  try {
    text = fs.readFileSync(path, 'utf8');
  } catch (err) {
    throw new TypeError(`keywarden config: cannot read ${path}: ${(err as Error).message}`);
  }
  try {
    return parseConfig(JSON.parse(text));
  } catch (err) {
    if (err instanceof SyntaxError) throw new TypeError(`keywarden config: ${path} is not JSON: ${err.message}`);
    throw err;
  }
}
