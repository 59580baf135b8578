// The keys every host of a deployment must share (the response-signing seed, the license-hash key,
// the two-factor key, and any added later: docs/protocol.md 11.40)
// are checked against the database at start: the first host records a keyed fingerprint of each
// (HMAC-SHA256 under the key itself, of a fixed label: it tells keys apart and reveals nothing of
// them), and a host whose key differs refuses to start. Without this, a host with other keys joins
// silently: its signatures fail client verification and the sessions it seals are 401 elsewhere.
import { hmacSha256 } from '../crypto/index.js';
import type { Sql } from './sql.js';

const LABEL = 'keywarden deployment key fingerprint v1';

interface DeploymentKeyInput {
  /** `response_signing:<kid>`, `license_hash` or `two_factor`. */
  name: string;
  /** The setting that carries it (the message names it). */
  setting: string;
  key: Buffer;
}

/** This host's keys are not the ones the database was first used with. */
export class KeyMismatchError extends Error {}

function keyFingerprint(key: Buffer): string {
  return hmacSha256(key, LABEL).toString('hex');
}

/** Records the fingerprints on first start; throws KeyMismatchError when one differs from the recorded one. */
export async function checkDeploymentKeys(sql: Sql, keys: readonly DeploymentKeyInput[], now: Date): Promise<void> {
  const differ: string[] = [];
  for (const k of keys) {
    const mine = keyFingerprint(k.key);
    await sql.run(
      'insert into deployment_keys (name, fingerprint, created_at) values (?, ?, ?) on conflict (name) do nothing',
      [k.name, mine, now],
    );
    const row = await sql.one<{ fingerprint: string }>('select fingerprint from deployment_keys where name = ?', [
      k.name,
    ]);
    if (row && row.fingerprint !== mine)
      differ.push(
        `${k.setting} (fingerprint ${mine.slice(0, 12)}, the database expects ${row.fingerprint.slice(0, 12)})`,
      );
  }
  if (differ.length > 0)
    throw new KeyMismatchError(
      `this host's keys differ from the ones this database was first used with: ${differ.join('; ')}. ` +
        'Every host of a deployment must share them: on a host that runs, `keywarden secrets export > keys.env`; ' +
        'copy keys.env here (securely) and run `keywarden secrets import < keys.env`, or set the same ' +
        `${keys.map((k) => k.setting).join(', ')} on every host (docs/multi-host.md).`,
    );
}
