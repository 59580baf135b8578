// The house rules that a folder structure alone cannot keep (STYLE "The shape of the house"):
// - platform/ knows no domain: it imports nothing from modules/;
// - a module reaches another only through that module's index.ts (its public surface);
// - each native or infrastructure package is imported by the one platform folder that owns it;
// - no export that nothing imports (dead code that looks alive).
// `npm test` runs `npm run lint` first, so CI enforces all of it.
import fs from 'node:fs';
import tseslint from 'typescript-eslint';
import importX from 'eslint-plugin-import-x';
import { createTypeScriptImportResolver } from 'eslint-import-resolver-typescript';

const MODULES = fs
  .readdirSync(new URL('./src/modules', import.meta.url), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name);

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
  { ignores: ['dist/**', 'node_modules/**', 'web/dist/**'] },
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
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
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
