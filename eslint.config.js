// The house rules that a folder structure alone cannot keep (docs/architecture.md "Dependency rules"):
// - platform/ knows no domain: it imports nothing from modules/;
// - a module reaches another only through that module's index.ts (its public surface);
// - modules import each other in one direction: MODULE_ORDER below, each only from modules before
//   it (types too), and no import cycle inside a module either (import-x/no-cycle);
// - each native or infrastructure package is imported by the one platform folder that owns it;
// - no export that nothing imports (dead code that looks alive).
// `npm test` runs `npm run lint` first, so CI enforces all of it.
// Beyond src/, typescript-eslint's recommended rules hold for the tests, the dashboard (web/), the
// benchmarks, the load tester and the TypeScript SDK; the SDK's source, which runs in customers' programs,
// also gets the type-aware promise rules (docs/decisions.md "Linting beyond src/").
import fs from 'node:fs';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const MODULES = fs
  .readdirSync(new URL('./src/modules', import.meta.url), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name);

/**
 * The declared module order (docs/architecture.md "Module map"): a module may import only modules
 * listed before it, `import type` included. A module folder missing here fails the lint at once.
 */
const MODULE_ORDER = [
  'access',
  'audit',
  'notify',
  'geo',
  'client',
  'heartbeat',
  'apps',
  'keys',
  'jobs',
  'releases',
  'activation',
  'commerce',
  'portal',
  'airgap',
  'realtime',
  'team',
  'system',
];
const unlisted = MODULES.filter((m) => !MODULE_ORDER.includes(m));
if (unlisted.length > 0) {
  throw new Error(`eslint.config.js: add src/modules/${unlisted.join(', ')} to MODULE_ORDER (a module's place in it)`);
}

/** Module X may import module Y only when Y comes before X (no-restricted-paths sees `import type` too). */
const orderZones = MODULE_ORDER.flatMap((target, i) =>
  MODULE_ORDER.slice(i + 1).map((later) => ({
    target: `./src/modules/${target}`,
    from: `./src/modules/${later}`,
    message: `modules/${target} comes before modules/${later} in MODULE_ORDER (eslint.config.js): it may not import it`,
  })),
);

/** Module X may import module Y only through Y's index.ts. */
const moduleZones = MODULES.flatMap((target) =>
  MODULES.filter((from) => from !== target).map((from) => ({
    target: `./src/modules/${target}`,
    from: `./src/modules/${from}`,
    except: ['./index.ts'],
    message: `modules/${target} may use modules/${from} only through its index.ts`,
  })),
);

/** Packages only one platform folder may import. */
const OWNED = [
  { name: 'uWebSockets.js', owner: 'src/platform/http' },
  { name: 'sodium-native', owner: 'src/platform/crypto' },
  { name: 'ioredis', owner: 'src/platform/cluster' },
  // The encoding of what crosses a process: platform/cluster/names.ts re-exports it with every name.
  { name: 'msgpackr', owner: 'src/platform/cluster' },
  { name: 'koffi', owner: 'src/platform/runtime' },
  { name: '@mikro-orm/postgresql', owner: 'src/platform/db' },
  { name: '@mikro-orm/migrations', owner: 'src/platform/db' },
  { name: '@mikro-orm/knex', owner: 'src/platform/db' },
];

/** A role name, as a principal's or an account's role is compared with it. */
const ROLE_NAME = '/^(owner|admin|reseller|developer)$/';
const ROLE_OPERAND = (side) => `:matches([${side}.property.name='role'], [${side}.name='role'])`;
/** Outside modules/access nobody decides by role: the resource's policy (access/policies.ts) does. */
const ROLE_CHECKS = [
  ...['left', 'right'].map((side) => ({
    selector:
      `BinaryExpression[operator=/^[!=]==?$/]${ROLE_OPERAND(side)}` +
      `[${side === 'left' ? 'right' : 'left'}.value=${ROLE_NAME}]`,
    message: 'compare no role outside modules/access: ask the resource policy (access/policies.ts)',
  })),
  {
    selector: "SwitchStatement[discriminant.property.name='role']",
    message: 'switch on no role outside modules/access: ask the resource policy (access/policies.ts)',
  },
  {
    selector: "CallExpression[callee.name='requireRole']",
    message: 'list no roles outside modules/access: ask the resource policy (access/policies.ts)',
  },
];

/** Modules see no uWS: HttpServer to mount on, platform/http/sockets.ts for WebSockets and event streams. */
const UWS_MESSAGE = 'modules see no uWS type: mount sockets and streams with platform/http/sockets.ts';
const UWS_IMPORT = 'ImportDeclaration[source.value=/platform\\/http\\/uws\\.js$/]';
const UWS_CHECKS = [
  { selector: `${UWS_IMPORT} > ImportSpecifier[imported.name!='HttpServer']`, message: UWS_MESSAGE },
  { selector: `${UWS_IMPORT} > ImportNamespaceSpecifier`, message: UWS_MESSAGE },
  { selector: "TSImportType[argument.literal.value='uWebSockets.js']", message: UWS_MESSAGE },
];

export default tseslint.config(
  { ignores: ['dist/**', '**/node_modules/**', 'web/dist/**', 'sdk/typescript/dist/**', 'bench/.build/**'] },
  {
    files: ['src/**/*.ts'],
    extends: [tseslint.configs.recommended],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [createTypeScriptImportResolver({ project: './tsconfig.json' })],
      // Files the rules read but do not lint (tests, tools) are TypeScript too.
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts', '.tsx', '.mts'] },
      'import-x/extensions': ['.ts', '.tsx', '.mts', '.js', '.mjs'],
    },
    rules: {
      'import-x/no-restricted-paths': [
        'error',
        {
          zones: [
            { target: './src/platform', from: './src/modules', message: 'platform/ imports no module' },
            ...moduleZones,
            ...orderZones,
          ],
        },
      ],
      'import-x/no-unused-modules': [
        'error',
        {
          unusedExports: true,
          // Everything that imports from src/ counts as a use: the server, its tests, benchmarks and tools.
          src: [
            'src/**/*.ts',
            'test/**/*.ts',
            'bench/**/*.ts',
            'scripts/**/*.ts',
            'loadtest/**/*.ts',
            'web/scripts/**/*.ts',
            'web/src/**/*.test.ts',
          ],
          // Entry points (run, not imported) and the migrations MikroORM loads by list.
          ignoreExports: ['src/cli.ts', 'src/platform/crypto/sodium-native.d.ts'],
        },
      ],
      'no-restricted-imports': [
        'error',
        { paths: OWNED.map((p) => ({ name: p.name, message: `only ${p.owner} imports ${p.name}` })) },
      ],
      'import-x/no-duplicates': 'error',
      // Value imports only: the rule skips `import type` (MODULE_ORDER's zones catch those between modules).
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts', 'loadtest/**/*.ts', 'sdk/typescript/**/*.ts', 'web/**/*.{ts,tsx}'],
    extends: [tseslint.configs.recommended],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // Tests and benchmarks read whatever JSON the server sends and assert on it: their response bodies are
    // `any` on purpose (the helpers' `ApiResponse<T = any>`), so the rule would only move the cast around.
    files: ['test/**/*.ts', 'bench/**/*.ts', 'sdk/typescript/test/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    // A promise nobody awaits or catches is a lost error in a customer's program. Type-aware, so it costs a
    // TypeScript program: worth it for the SDK (about 4 s of CPU); over web/src it cost 8 s more and found
    // nothing, so the dashboard keeps the syntactic rules (docs/decisions.md "Linting beyond src/").
    files: ['sdk/typescript/src/**/*.ts'],
    languageOptions: {
      parserOptions: { project: ['./sdk/typescript/tsconfig.esm.json'], tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
    },
  },
  // no-restricted-syntax: the last block matching a file sets its whole list.
  { files: ['src/**/*.ts'], ignores: ['src/modules/**'], rules: { 'no-restricted-syntax': ['error', ...ROLE_CHECKS] } },
  {
    files: ['src/modules/**/*.ts'],
    ignores: ['src/modules/access/**'],
    rules: { 'no-restricted-syntax': ['error', ...ROLE_CHECKS, ...UWS_CHECKS] },
  },
  { files: ['src/modules/access/**/*.ts'], rules: { 'no-restricted-syntax': ['error', ...UWS_CHECKS] } },
  // Each owner may import its own package.
  ...OWNED.map((p) => ({
    files: [`${p.owner}/**/*.ts`],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: OWNED.filter((o) => o.owner !== p.owner).map((o) => ({
            name: o.name,
            message: `only ${o.owner} imports ${o.name}`,
          })),
        },
      ],
    },
  })),
);
