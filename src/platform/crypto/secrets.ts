// Long-lived secrets: taken from configuration, else generated once into DATA_DIR/secrets
// (0600, created with O_EXCL so concurrently starting workers agree on one value).
import fs from 'node:fs/promises';
import path from 'node:path';
import {
  ED25519_SEED_BYTES,
  SECRETBOX_KEY_BYTES,
  hkdfSha256,
  randomBytes,
  signingKeyFromSeed,
  type SigningKeyPair,
} from './index.js';
import type { Config } from '../../config.js';

async function loadOrCreate(file: string, bytes: number): Promise<Buffer> {
  await fs.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    await fs.writeFile(file, randomBytes(bytes).toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  return Buffer.from((await fs.readFile(file, 'utf8')).trim(), 'base64');
}

function fromBase64(name: string, value: string, minBytes: number, exactBytes?: number): Buffer {
  const buf = Buffer.from(value, 'base64');
  if ((exactBytes !== undefined && buf.byteLength !== exactBytes) || buf.byteLength < minBytes) {
    throw new Error(`${name} must be base64 of ${exactBytes ?? `at least ${minBytes}`} bytes`);
  }
  return buf;
}

export interface ResponseSigningKey extends SigningKeyPair {
  readonly kid: string;
}

export interface Secrets {
  /** The active response-signing key (PROTOCOL 4). */
  readonly signing: ResponseSigningKey;
  /** Every published key; the active one is among them. */
  readonly publishedKeys: readonly ResponseSigningKey[];
  /** Key of the HMAC under which license keys are stored (PROTOCOL 9). */
  readonly licenseHashKey: Buffer;
  /**
   * Key of the sealed client-session tokens (modules/client/session-token.ts). Derived from the active
   * response-signing seed, which every worker of a deployment shares (DATA_DIR or
   * RESPONSE_SIGNING_KEY), under its own label: the signing key itself is never used for it.
   */
  readonly sessionTokenKey: Buffer;
  /**
   * Key of the dashboard's two-factor secrets at rest (secretbox) and of the keyed hash of recovery
   * codes (derived under its own label). From TWO_FACTOR_KEY, else DATA_DIR/secrets/two-factor.key.
   */
  readonly twoFactorKey: Buffer;
  /**
   * Key of the keyed hash under which API tokens are stored, derived from the license-hash key under
   * its own label: every host of a deployment already shares that key, and a token is then known on all.
   */
  readonly apiTokenKey: Buffer;
  /**
   * Key (secretbox) of other secrets kept at rest: products' webhook secrets and the plaintext keys of
   * recent orders. Derived from the two-factor key under its own label, so it is shared the same way.
   */
  readonly sealKey: Buffer;
}

/** HKDF label of the session-token key; a new token format gets a new label. */
export const SESSION_TOKEN_KEY_INFO = 'keywarden client-session token v1';
const API_TOKEN_KEY_INFO = 'keywarden api-token hash v1';
const SEAL_KEY_INFO = 'keywarden sealed secrets v1';

export async function loadSecrets(config: Config): Promise<Secrets> {
  const dir = path.join(config.dataDir, 'secrets');
  const seed = config.responseSigningKey
    ? fromBase64('RESPONSE_SIGNING_KEY', config.responseSigningKey, ED25519_SEED_BYTES, ED25519_SEED_BYTES)
    : await loadOrCreate(path.join(dir, `response-signing-${config.responseSigningKid}.seed`), ED25519_SEED_BYTES);
  const signing: ResponseSigningKey = { kid: config.responseSigningKid, ...signingKeyFromSeed(seed) };
  const licenseHashKey = config.licenseHashKey
    ? fromBase64('LICENSE_HASH_KEY', config.licenseHashKey, 32)
    : await loadOrCreate(path.join(dir, 'license-hash.key'), 32);
  const sessionTokenKey = hkdfSha256(seed, SESSION_TOKEN_KEY_INFO, 32);
  const twoFactorKey = config.twoFactorKey
    ? fromBase64('TWO_FACTOR_KEY', config.twoFactorKey, SECRETBOX_KEY_BYTES, SECRETBOX_KEY_BYTES)
    : await loadOrCreate(path.join(dir, 'two-factor.key'), SECRETBOX_KEY_BYTES);
  const apiTokenKey = hkdfSha256(licenseHashKey, API_TOKEN_KEY_INFO, 32);
  const sealKey = hkdfSha256(twoFactorKey, SEAL_KEY_INFO, SECRETBOX_KEY_BYTES);
  return { signing, publishedKeys: [signing], licenseHashKey, sessionTokenKey, twoFactorKey, apiTokenKey, sealKey };
}
