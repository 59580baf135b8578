// The committed OpenAPI types (src/api/schema.d.ts) must be those of the current route table:
// otherwise `tsc -p web` would check the dashboard against an API that no longer exists.
import fs from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { openApiDocument, SCHEMA_FILE, schemaTypes } from './gen-api.js';

describe('web/src/api/schema.d.ts', () => {
  it('is generated from the current route table (run `npm run gen:api -w web` when this fails)', async () => {
    const committed = await fs.readFile(SCHEMA_FILE, 'utf8');
    expect(committed === (await schemaTypes()), 'web/src/api/schema.d.ts is stale: run `npm run gen:api -w web`').toBe(true);
  });

  it('comes from the document GET /api/openapi.json serves (the dashboard routes are in it)', async () => {
    const doc = await openApiDocument() as { paths: Record<string, Record<string, { requestBody?: unknown }>> };
    expect(doc.paths['/api/apps/{id}']?.patch?.requestBody).toBeDefined();
    expect(doc.paths['/api/apps/{id}/licenses']?.post?.requestBody).toBeDefined();
    expect(Object.keys(doc.paths)).toContain('/api/team/{id}/permissions');
  });
});
