// The house rules the linter enforces (eslint.config.js, run by `npm test` on all of src/): each
// is checked here against a planted violation, so a rule that stops working fails this test
// instead of letting the violation through quietly.
import path from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: root });

async function rulesBroken(file: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return result!.messages.map((m) => `${m.ruleId}: ${m.message}`);
}

describe('house rules (eslint.config.js)', () => {
  it('a module reaches another only through its index.ts', async () => {
    expect(
      await rulesBroken('src/modules/keys/probe.ts', "export { AppsService } from '../apps/apps.service.js';\n"),
    ).toEqual([
      expect.stringMatching(
        /^import-x\/no-restricted-paths: .*modules\/keys may use modules\/apps only through its index\.ts/,
      ),
    ]);
    expect(
      await rulesBroken('src/modules/keys/probe.ts', "export { AppsService } from '../apps/index.js';\n"),
    ).not.toContainEqual(expect.stringMatching(/no-restricted-paths/));
  });

  it('platform/ imports no module', async () => {
    expect(
      await rulesBroken('src/platform/http/probe.ts', "export { scopeOf } from '../../modules/apps/index.js';\n"),
    ).toContainEqual(expect.stringMatching(/^import-x\/no-restricted-paths: .*platform\/ imports no module/));
  });

  it('each infrastructure package is imported by the one platform folder that owns it', async () => {
    expect(
      await rulesBroken('src/modules/keys/probe.ts', "import sodium from 'sodium-native';\nexport const s = sodium;\n"),
    ).toContainEqual(
      expect.stringMatching(/^no-restricted-imports: .*only src\/platform\/crypto imports sodium-native/),
    );
    expect(
      await rulesBroken('src/platform/db/probe.ts', "import { Redis } from 'ioredis';\nexport const r = Redis;\n"),
    ).toContainEqual(expect.stringMatching(/only src\/platform\/cluster imports ioredis/));
    expect(
      await rulesBroken('src/modules/notify/probe.ts', "import { pack } from 'msgpackr';\nexport const p = pack;\n"),
    ).toContainEqual(expect.stringMatching(/only src\/platform\/cluster imports msgpackr/));
    expect(
      await rulesBroken(
        'src/platform/crypto/probe.ts',
        "import sodium from 'sodium-native';\nexport const s = sodium;\n",
      ),
    ).not.toContainEqual(expect.stringMatching(/no-restricted-imports/));
  });

  it('modules see no uWS type: sockets and streams are platform/http/sockets.ts', async () => {
    const uws = /^no-restricted-syntax: modules see no uWS type/;
    expect(
      await rulesBroken(
        'src/modules/realtime/probe.ts',
        "import { writeReply } from '../../platform/http/uws.js';\nexport const w = writeReply;\n",
      ),
    ).toContainEqual(expect.stringMatching(uws));
    expect(
      await rulesBroken(
        'src/modules/notify/probe.ts',
        "export type Ws = import('uWebSockets.js').WebSocket<unknown>;\n",
      ),
    ).toContainEqual(expect.stringMatching(uws));
    expect(
      await rulesBroken(
        'src/modules/realtime/probe.ts',
        "import type { HttpServer } from '../../platform/http/uws.js';\nexport type S = HttpServer;\n",
      ),
    ).toEqual([]);
  });

  it('outside modules/access nobody compares roles: the resource policy decides', async () => {
    const policy = /^no-restricted-syntax: .*ask the resource policy \(access\/policies\.ts\)/;
    expect(
      await rulesBroken(
        'src/modules/keys/probe.ts',
        "export const sells = (p: { role: string }) => p.role === 'reseller';\n",
      ),
    ).toEqual([expect.stringMatching(policy)]);
    expect(
      await rulesBroken(
        'src/modules/keys/probe.ts',
        "import { requireRole, type Principal } from '../access/principal.js';\n" +
          "export const f = (p: Principal) => requireRole(p, 'owner');\n",
      ),
    ).toContainEqual(expect.stringMatching(policy));
    expect(
      await rulesBroken(
        'src/modules/access/probe.ts',
        "export const sells = (p: { role: string }) => p.role === 'reseller';\n",
      ),
    ).toEqual([]);
  });
}, 60_000);
