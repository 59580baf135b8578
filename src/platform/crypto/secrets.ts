// Long-lived secrets: taken from configuration, else generated once into DATA_DIR/secrets
// (0600, linked into place whole so concurrently starting workers agree on one complete value).
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
  // Written whole under a name of its own, then linked into place: link() fails with EEXIST when
  // another worker got there first, and a reader never sees a created but still empty file.
  const draft = `${file}.${process.pid}.${randomBytes(6).toString('hex')}`;
  await fs.writeFile(draft, randomBytes(bytes).toString('base64') + '\n', { mode: 0o600, flag: 'wx' });
  try {
    await fs.link(draft, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  } finally {
    await fs.unlink(draft);
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
  /** The active response-signing key (docs/protocol.md 4). */
  readonly signing: ResponseSigningKey;
  /** Every published key; the active one is among them. */
  readonly publishedKeys: readonly ResponseSigningKey[];
  /** Key of the HMAC under which license keys are stored (docs/protocol.md 9). */
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
  /** The active response-signing seed (its fingerprint is checked against the database at start). */
  readonly signingSeed: Buffer;
}

/** HKDF label of the session-token key; a new token format gets a new label. */
export const SESSION_TOKEN_KEY_INFO = 'keywarden client-session token v1';
const API_TOKEN_KEY_INFO = 'keywarden api-token hash v1';
const SEAL_KEY_INFO = 'keywarden sealed secrets v1';

/** A key to export is missing, or the input to import is incomplete or would replace another key. */
export class SecretsError extends Error {}

/** The settings that carry the shared keys (`keywarden secrets export` prints them, `import` stores them). */
export const SHARED_KEY_SETTINGS = [
  'RESPONSE_SIGNING_KEY',
  'RESPONSE_SIGNING_KID',
  'LICENSE_HASH_KEY',
  'TWO_FACTOR_KEY',
];

function secretFiles(config: Config, kid = config.responseSigningKid) {
  const dir = path.join(config.dataDir, 'secrets');
  return {
    dir,
    signing: path.join(dir, `response-signing-${kid}.seed`),
    licenseHash: path.join(dir, 'license-hash.key'),
    twoFactor: path.join(dir, 'two-factor.key'),
  };
}

/**
 * The keys this host uses, as settings (base64), from the configuration else DATA_DIR/secrets:
 * what `keywarden secrets export` prints. Nothing is created: a key neither set nor stored is an error.
 */
export async function exportSecrets(config: Config): Promise<Record<string, string>> {
  const files = secretFiles(config);
  const read = async (setting: string, value: string | undefined, file: string) => {
    if (value) return value;
    try {
      return (await fs.readFile(file, 'utf8')).trim();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      throw new SecretsError(
        `${setting} is not set and ${file} does not exist: is DATA_DIR the one this host runs with?`,
      );
    }
  };
  return {
    RESPONSE_SIGNING_KEY: await read('RESPONSE_SIGNING_KEY', config.responseSigningKey, files.signing),
    RESPONSE_SIGNING_KID: config.responseSigningKid,
    LICENSE_HASH_KEY: await read('LICENSE_HASH_KEY', config.licenseHashKey, files.licenseHash),
    TWO_FACTOR_KEY: await read('TWO_FACTOR_KEY', config.twoFactorKey, files.twoFactor),
  };
}

/**
 * Stores exported keys into DATA_DIR/secrets (0600), where a host started without those settings
 * reads them: what `keywarden secrets import` does. A different key already stored there is kept
 * unless `force` (it may be what this host's data was made with); returns the files written.
 */
export async function importSecrets(config: Config, values: Record<string, string>, force: boolean): Promise<string[]> {
  const kid = values.RESPONSE_SIGNING_KID ?? 'k1';
  const files = secretFiles(config, kid);
  const items: [string, string, number, number | undefined][] = [
    [files.signing, 'RESPONSE_SIGNING_KEY', ED25519_SEED_BYTES, ED25519_SEED_BYTES],
    [files.licenseHash, 'LICENSE_HASH_KEY', 32, undefined],
    [files.twoFactor, 'TWO_FACTOR_KEY', SECRETBOX_KEY_BYTES, SECRETBOX_KEY_BYTES],
  ];
  for (const [, setting, min, exact] of items) {
    const v = values[setting];
    if (!v) throw new SecretsError(`${setting} is missing from the input (the output of \`keywarden secrets export\`)`);
    try {
      fromBase64(setting, v, min, exact);
    } catch (err) {
      throw new SecretsError((err as Error).message);
    }
  }
  await fs.mkdir(files.dir, { recursive: true, mode: 0o700 });
  const written: string[] = [];
  for (const [file, setting] of items) {
    const value = values[setting]!;
    let current: string | undefined;
    try {
      current = (await fs.readFile(file, 'utf8')).trim();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (current === value) continue;
    if (current !== undefined && !force)
      throw new SecretsError(`${file} holds another ${setting}: move it away, or run again with --force to replace it`);
    await fs.writeFile(file, value + '\n', { mode: 0o600 });
    await fs.chmod(file, 0o600);
    written.push(file);
  }
  return written;
}

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
  return {
    signing,
    publishedKeys: [signing],
    licenseHashKey,
    sessionTokenKey,
    twoFactorKey,
    apiTokenKey,
    sealKey,
    signingSeed: seed,
  };
}
