// The house rules the linter enforces (eslint.config.js, run by `npm test` on all of src/): each
// is checked here against a planted violation, so a rule that stops working fails this test
// instead of letting the violation through quietly.
import fs from 'node:fs';
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

  it('a module imports only modules before it in MODULE_ORDER, `import type` included', async () => {
    // audit comes before apps: even a type from apps would point the dependency the wrong way.
    expect(
      await rulesBroken('src/modules/audit/probe.ts', "export type { AppsService } from '../apps/index.js';\n"),
    ).toContainEqual(
      expect.stringMatching(
        /^import-x\/no-restricted-paths: .*modules\/audit comes before modules\/apps in MODULE_ORDER/,
      ),
    );
    // keys comes after apps: allowed.
    expect(
      await rulesBroken('src/modules/keys/probe.ts', "export type { AppsService } from '../apps/index.js';\n"),
    ).not.toContainEqual(expect.stringMatching(/MODULE_ORDER/));
  });

  it('no import cycle (two files that import each other)', async () => {
    // The rule follows files on disk: both halves of the cycle are written, linted, then removed.
    const dir = path.join(root, 'src/modules/keys');
    const a = path.join(dir, `probe-cycle-a-${process.pid}.ts`);
    const b = path.join(dir, `probe-cycle-b-${process.pid}.ts`);
    const codeA = `import { b } from './probe-cycle-b-${process.pid}.js';\nexport const a = () => b;\n`;
    fs.writeFileSync(a, codeA);
    fs.writeFileSync(b, `import { a } from './probe-cycle-a-${process.pid}.js';\nexport const b = () => a;\n`);
    try {
      expect(await rulesBroken(path.relative(root, a), codeA)).toContainEqual(
        expect.stringMatching(/^import-x\/no-cycle: Dependency cycle detected/),
      );
    } finally {
      fs.rmSync(a, { force: true });
      fs.rmSync(b, { force: true });
    }
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

  it('typescript-eslint also holds beyond src/: tests, dashboard, benchmarks, load tester, TypeScript SDK', async () => {
    const unused = 'const left = 1;\nexport const used = 2;\n';
    for (const file of [
      'test/modules/keys/probe.test.ts',
      'web/src/views/Probe.tsx',
      'bench/probe.ts',
      'loadtest/probe.ts',
      'sdk/typescript/test/probe.test.ts',
    ]) {
      expect(await rulesBroken(file, unused), file).toContainEqual(
        expect.stringMatching(/^@typescript-eslint\/no-unused-vars: 'left'/),
      );
    }
    const loose = 'export const f = (x: any) => x;\n';
    expect(await rulesBroken('web/src/lib/probe.ts', loose)).toContainEqual(
      expect.stringMatching(/^@typescript-eslint\/no-explicit-any/),
    );
    // Tests read the server's JSON as `any` on purpose (eslint.config.js).
    expect(await rulesBroken('test/modules/keys/probe.test.ts', loose)).toEqual([]);
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
  // The first lint reads every file src/ imports (no-unused-modules, no-cycle): a minute or more on a busy machine.
}, 180_000);
