import { EntitySchema } from '@mikro-orm/core';

/**
 * What a single process without Redis keeps in memory and must not lose to a restart (activated
 * client sessions, heartbeat sessions), checkpointed here every second and on shutdown, restored at
 * start. With Redis the same state lives in Redis and this table stays empty.
 */
export interface ProcessState {
  /** Which store the entry belongs to: `kv` (coordinator keys), `hb` (heartbeat sessions). */
  kind: string;
  key: string;
  value: Buffer;
  expiresAt: Date;
}

export const ProcessStateSchema = new EntitySchema<ProcessState>({
  name: 'ProcessState',
  tableName: 'process_state',
  properties: {
    kind: { type: 'string', length: 16, primary: true },
    key: { type: 'text', primary: true },
    value: { type: 'blob' },
    expiresAt: { type: 'datetime', index: true },
  },
});
