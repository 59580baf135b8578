import { EntitySchema } from '@mikro-orm/core';

/**
 * A keyed fingerprint of a key every host of a deployment must share (the response-signing seed of
 * a kid, the license-hash key), written by the first host that starts on this database. Never the key.
 */
export interface DeploymentKey {
  /** `response_signing:<kid>` or `license_hash`. */
  name: string;
  /** hex HMAC-SHA256(key, fixed label): tells keys apart, reveals nothing of them. */
  fingerprint: string;
  createdAt: Date;
}

export const DeploymentKeySchema = new EntitySchema<DeploymentKey>({
  name: 'DeploymentKey',
  tableName: 'deployment_keys',
  properties: {
    name: { type: 'string', length: 64, primary: true },
    fingerprint: { type: 'string', length: 64 },
    createdAt: { type: 'datetime' },
  },
});
