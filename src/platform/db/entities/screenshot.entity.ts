import { EntitySchema } from '@mikro-orm/core';

/**
 * One screenshot kept for a key or an end user (docs/protocol.md 11.27). The file is named by its content
 * (`screenshots/<app id>/<sha256>.<ext>` under DATA_DIR), so an identical image is stored once per
 * application however often it is sent; a row per owner keeps that owner's newest 20.
 */
export interface Screenshot {
  /** The key or end user the screenshot was sent for. */
  ownerId: string;
  sha256: string;
  appId: string;
  ext: string;
  bytes: number;
  at: Date;
}

export const ScreenshotSchema = new EntitySchema<Screenshot>({
  name: 'Screenshot',
  tableName: 'screenshots',
  indexes: [{ properties: ['appId', 'sha256'] }, { properties: ['at'] }],
  properties: {
    ownerId: { type: 'uuid', primary: true },
    sha256: { type: 'string', length: 64, primary: true },
    appId: { kind: 'm:1', entity: 'Application', mapToPk: true, fieldName: 'app_id', deleteRule: 'cascade' },
    ext: { type: 'string', length: 4 },
    bytes: { type: 'integer' },
    at: { type: 'datetime' },
  },
});
