// The per-application client archive (docs/spec.md: GET /apps/{id}/sdk/{lang} streams svc_sdk_<lang>.zip).
// It carries that language's library source from sdk/<lang>/ (with its example program and
// README), plus keywarden.json preconfigured for the application (format 1, sdk/vectors/README.md)
// and a README section about what the download contains and what must not be shipped carelessly.
// Sources are read at request time; the zip is deterministic (sorted entries, fixed timestamps),
// so two downloads of one app are byte-identical.
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { strToU8, zip, type AsyncZippable } from 'fflate';
import type { Application } from '../../platform/db/entities/index.js';
import type { ResponseSigningKey } from '../../platform/crypto/secrets.js';

export const SDK_LANGS = ['python', 'csharp', 'cpp', 'typescript', 'go', 'java'] as const;
type SdkLang = (typeof SDK_LANGS)[number];

export function isSdkLang(v: string): v is SdkLang {
  return (SDK_LANGS as readonly string[]).includes(v);
}

export function sdkFileName(lang: SdkLang): string {
  return `svc_sdk_${lang}.zip`;
}

/** The application fields keywarden.json is made of. */
interface ClientConfigSource {
  /** The application's id: offline license files must name it (docs/protocol.md 12.5). */
  id?: string;
  name: string;
  apiKey: string;
  apiSecret: string;
  version: string;
  requireSignature: boolean;
}

/**
 * keywarden.json, format 1, exactly as every SDK reads it (sdk/vectors/README.md). The api_secret
 * goes in only when the application requires signed requests: shipped inside a binary it is
 * recoverable, so it is not handed out where it buys nothing.
 */
export function clientConfig(
  app: ClientConfigSource,
  keys: readonly ResponseSigningKey[] | readonly { kid: string; public_key: string }[],
  baseUrl: string,
) {
  return {
    format: 1,
    base_url: baseUrl.replace(/\/+$/, ''),
    app_name: app.name,
    api_key: app.apiKey,
    version: app.version,
    response_keys: keys.map((k) => ({
      kid: k.kid,
      alg: 'Ed25519',
      public_key: 'public_key' in k ? k.public_key : k.publicKey.toString('base64'),
    })),
    ...(app.id ? { app_id: app.id } : {}),
    ...(app.requireSignature ? { api_secret: app.apiSecret } : {}),
  };
}

// Build outputs, caches and local environments: never part of a source download.
const SKIP_DIRS = new Set([
  'node_modules',
  'dist',
  'build',
  'out',
  'bin',
  'obj',
  '.vs',
  '.idea',
  '.vscode',
  '.git',
  '__pycache__',
  '.pytest_cache',
  '.mypy_cache',
  '.ruff_cache',
  '.tox',
  '.venv',
  'venv',
  'CMakeFiles',
  '.cache',
  'Testing',
  'TestResults',
  'packages',
]);
const SKIP_EXTENSION = /\.(pyc|pyo|o|obj|a|so|dll|exe|pdb|nupkg|tgz|whl|log)$/i;
const SKIP_NAME = /^(\.DS_Store|CMakeCache\.txt|keywarden\.json|\.build-stamp)$/i;
const SKIP_DIR_PATTERN = /\.egg-info$|^cmake-build-/;
/** Per language: folders that only make sense inside this repository (the TypeScript tests import its test helpers). */
const REPO_ONLY: Partial<Record<SdkLang, readonly string[]>> = { typescript: ['test'] };
const MAX_FILE_BYTES = 8 << 20;
const FIXED_MTIME = new Date('2026-01-01T00:00:00Z');

/** The repository's sdk/ folder, found from this module whether it runs from src/ or a compiled dist/src/. */
function findSdkRoot(): string | undefined {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = path.join(dir, 'sdk');
    if (existsSync(path.join(candidate, 'vectors'))) return candidate;
    dir = path.dirname(dir);
  }
  return undefined;
}

async function collect(
  root: string,
  rel: string,
  skipTop: readonly string[],
  out: Map<string, Uint8Array>,
): Promise<void> {
  const entries = await fs.readdir(path.join(root, rel), { withFileTypes: true });
  for (const e of entries) {
    const relPath = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      if (SKIP_DIRS.has(e.name) || SKIP_DIR_PATTERN.test(e.name) || (rel === '' && skipTop.includes(e.name))) continue;
      await collect(root, relPath, skipTop, out);
    } else if (e.isFile() && !SKIP_EXTENSION.test(e.name) && !SKIP_NAME.test(e.name)) {
      const file = path.join(root, relPath);
      if ((await fs.stat(file)).size > MAX_FILE_BYTES) continue;
      out.set(relPath, await fs.readFile(file));
    }
  }
}

/**
 * The library files of one language (relative path -> bytes), read at request time (asynchronously,
 * off the event loop's critical path), so a download always matches the sources on disk and no
 * module-level cache is kept.
 */
async function sdkSources(lang: SdkLang, sdkRoot = findSdkRoot()): Promise<ReadonlyMap<string, Uint8Array>> {
  const out = new Map<string, Uint8Array>();
  const dir = sdkRoot ? path.join(sdkRoot, lang) : undefined;
  if (dir && existsSync(dir)) await collect(dir, '', REPO_ONLY[lang] ?? [], out);
  return out;
}

function downloadReadme(lang: SdkLang, app: ClientConfigSource, baseUrl: string): string {
  const secret = app.requireSignature
    ? `- \`api_secret\`: this application has **require_signature** on, so the file carries the secret that signs every
  request. Anything shipped inside a program can be extracted from it: the secret raises the bar against
  scripted abuse, it does not stay secret from a determined user. Never publish keywarden.json (public
  repositories, support forums, screenshots); rotate the secret from the dashboard if it leaks
  (\`POST /apps/{id}/rotate-secret\`), which breaks every build carrying the old one.`
    : `- No \`api_secret\`: this application does not require signed requests, so the download does not carry it.
  Turning require_signature on later means downloading this archive again.`;
  return `## This download: ${app.name} (${lang})

\`keywarden.json\` is preconfigured for this application:
- \`base_url\`: ${baseUrl} (set the server's PUBLIC_URL if this is not how your users reach it).
- \`api_key\`: the application's public key; \`version\`: ${app.version} (sent on init; with force_update on a
  different version is refused as update_required).
- \`response_keys\`: the server's Ed25519 public keys; every answer must be signed by one of them.
${secret}

Do not commit \`keywarden.json\` to a public repository. The library verifies every answer and every heartbeat
proof; do not remove those checks to "make it work" (a refused answer is exactly what a cracker's fake server sends).
`;
}

interface ArchiveInput {
  lang: SdkLang;
  app: Application;
  keys: readonly ResponseSigningKey[];
  baseUrl: string;
}

export async function sdkArchive({ lang, app, keys, baseUrl }: ArchiveInput): Promise<Buffer> {
  const src: ClientConfigSource = {
    id: app.id,
    name: app.name,
    apiKey: app.apiKey,
    apiSecret: app.apiSecret,
    version: app.version,
    requireSignature: app.requireSignature,
  };
  const sources = await sdkSources(lang);
  const root = `svc_sdk_${lang}`;
  const files: AsyncZippable = {};
  for (const name of [...sources.keys()].sort()) {
    if (name === 'README.md') continue;
    files[`${root}/${name}`] = [sources.get(name)!, { mtime: FIXED_MTIME }];
  }
  const libraryReadme = sources.get('README.md');
  const readme =
    (libraryReadme ? Buffer.from(libraryReadme).toString('utf8').trimEnd() + '\n\n' : `# Keywarden ${lang} SDK\n\n`) +
    downloadReadme(lang, src, baseUrl);
  files[`${root}/README.md`] = [strToU8(readme), { mtime: FIXED_MTIME }];
  files[`${root}/keywarden.json`] = [
    strToU8(JSON.stringify(clientConfig(src, keys, baseUrl), null, 2) + '\n'),
    { mtime: FIXED_MTIME },
  ];
  const ordered: AsyncZippable = {};
  for (const k of Object.keys(files).sort()) ordered[k] = files[k]!;
  // fflate's async zip compresses on worker threads: a large C++ tree does not stall the event loop.
  return new Promise((resolve, reject) => {
    zip(ordered, { level: 6, mtime: FIXED_MTIME }, (err, data) => (err ? reject(err) : resolve(Buffer.from(data))));
  });
}
