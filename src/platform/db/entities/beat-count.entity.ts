import { EntitySchema } from '@mikro-orm/core';

/**
 * Accepted heartbeats of one application in one UTC hour, per reseller of the sessions' keys ('' for
 * keys of no reseller), so a chart is scoped like the other counts. Each worker counts in memory and
 * adds its counts here periodically (one upsert); the rows go with their application.
 */
export interface BeatCount {
  appId: string;
  resellerId: string;
  hour: Date;
  beats: string;
}

export const BeatCountSchema = new EntitySchema<BeatCount>({
  name: 'BeatCount',
  tableName: 'beat_counts',
  properties: {
    appId: {
      kind: 'm:1',
      entity: 'Application',
      mapToPk: true,
      primary: true,
      fieldName: 'app_id',
      deleteRule: 'cascade',
    },
    resellerId: { type: 'string', length: 36, primary: true },
    hour: { type: 'datetime', primary: true },
    beats: { type: 'bigint' },
  },
});
