// The web dashboard's static files (web/dist, built by scripts/build-web.mjs) at /dashboard/, and the
// customer portal's page (portal.html of the same build, its assets under /dashboard/assets/) at
// /portal/ and every path below it (/portal/orders/{id}).
// Files are read once, asynchronously, into memory (with a gzip copy of the compressible ones);
// a request never touches the disk. Hashed assets are cached for a year, index.html never without
// revalidation, and every HTML answer carries a strict Content-Security-Policy (no inline script).
// Paths without a file extension fall back to index.html (the SPA routes itself); a missing file
// with an extension is 404, so a stale hashed asset is never answered with HTML.
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import type { HttpServer } from './uws.js';
import type { IncomingRequest, Reply } from './types.js';

const gzipAsync = promisify(gzip);

const DASHBOARD_PREFIX = '/dashboard/';
const PORTAL_PREFIX = '/portal/';

export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "connect-src 'self' ws: wss:",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

const COMMON_HEADERS = { 'X-Content-Type-Options': 'nosniff', 'Referrer-Policy': 'same-origin' } as const;
const IMMUTABLE = 'public, max-age=31536000, immutable';
/**
 * How long a missing build, or a loaded one, is trusted before web/dist is looked at again (a rebuild is
 * served without a restart).
 */
const RECHECK_MS = 2_000;

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.webmanifest': 'application/manifest+json',
};
const COMPRESSIBLE = new Set(['.html', '.js', '.css', '.json', '.svg', '.txt', '.webmanifest']);

interface StaticFile {
  body: Buffer;
  gzipped: Buffer | undefined;
  type: string;
  cache: string;
}

type Bundle =
  { files: Map<string, StaticFile>; dir: string; stamp: number; checked: number } | { missing: string; at: number };

/** The repository root: the nearest directory above `from` whose package.json is named "keywarden". */
async function findRepoRoot(from: string): Promise<string | undefined> {
  for (let dir = from; ; dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(await fs.readFile(path.join(dir, 'package.json'), 'utf8')) as { name?: unknown };
      if (pkg.name === 'keywarden') return dir;
    } catch {
      // no package.json here (or not JSON): keep walking up
    }
    if (path.dirname(dir) === dir) return undefined;
  }
}

/** web/dist of this checkout, whether the server runs from src/ (tsx) or from dist/src/ (compiled). */
async function defaultWebDist(): Promise<string | undefined> {
  const root = await findRepoRoot(path.dirname(fileURLToPath(import.meta.url))); // import.meta.dirname needs Node 20.11
  return root ? path.join(root, 'web', 'dist') : undefined;
}

async function listFiles(dir: string, rel = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(path.join(dir, rel), { withFileTypes: true })) {
    const child = rel ? `${rel}/${entry.name}` : entry.name;
    if (entry.isDirectory()) out.push(...(await listFiles(dir, child)));
    else if (entry.isFile() && !entry.name.startsWith('.')) out.push(child);
  }
  return out;
}

/** mtime of index.html (scripts/build-web.mjs swaps a whole new directory in, so it changes with every build). */
async function buildStamp(dir: string): Promise<number | undefined> {
  try {
    return (await fs.stat(path.join(dir, 'index.html'))).mtimeMs;
  } catch {
    return undefined;
  }
}

async function loadBundle(dir: string): Promise<Bundle> {
  const stamp = await buildStamp(dir);
  if (stamp === undefined) return { missing: dir, at: Date.now() };
  const files = new Map<string, StaticFile>();
  for (const rel of await listFiles(dir)) {
    const ext = path.extname(rel).toLowerCase();
    const body = await fs.readFile(path.join(dir, rel));
    const gzipped = COMPRESSIBLE.has(ext) && body.length > 1024 ? await gzipAsync(body, { level: 9 }) : undefined;
    files.set(rel, {
      body,
      gzipped: gzipped && gzipped.length < body.length ? gzipped : undefined,
      type: TYPES[ext] ?? 'application/octet-stream',
      // Vite puts content-hashed files under assets/; everything else may change under the same name.
      cache: rel.startsWith('assets/') ? IMMUTABLE : 'no-cache',
    });
  }
  return { files, dir, stamp, checked: Date.now() };
}

function fileReply(req: IncomingRequest, f: StaticFile, status = 200): Reply {
  const headers: Record<string, string> = { 'Content-Type': f.type, 'Cache-Control': f.cache, ...COMMON_HEADERS };
  if (f.type.startsWith('text/html')) {
    headers['Content-Security-Policy'] = DASHBOARD_CSP;
    headers['X-Frame-Options'] = 'DENY';
  }
  let body = f.body;
  if (f.gzipped) {
    headers['Vary'] = 'Accept-Encoding';
    if (/\bgzip\b/.test(req.headers['accept-encoding'] ?? '')) {
      headers['Content-Encoding'] = 'gzip';
      body = f.gzipped;
    }
  }
  return { status, body, headers };
}

const text = (status: number, body: string, extra: Record<string, string> = {}): Reply => ({
  status,
  body,
  headers: { 'Content-Type': 'text/plain; charset=utf-8', 'Cache-Control': 'no-store', ...COMMON_HEADERS, ...extra },
});

/**
 * Serves the dashboard from `dir` (default: web/dist of this checkout). The files are read on the
 * first request (or by `preload()`), then kept; a missing build answers 503 and is looked for again.
 */
export function dashboardFiles(dir?: string) {
  let bundle: Promise<Bundle> | undefined;
  const current = (): Promise<Bundle> => {
    bundle ??= (async () => {
      const d = dir ?? (await defaultWebDist());
      return d ? loadBundle(d) : { missing: 'web/dist (no keywarden checkout found above the server)', at: Date.now() };
    })().catch((err: unknown) => ({
      missing: `web/dist (${err instanceof Error ? err.message : String(err)})`,
      at: Date.now(),
    }));
    return bundle;
  };

  async function handle(req: IncomingRequest): Promise<Reply> {
    if (req.path === '/dashboard') return text(308, 'Moved to /dashboard/\n', { Location: '/dashboard/' });
    if (req.path === '/portal') return text(308, 'Moved to /portal/\n', { Location: '/portal/' });
    const portal = req.path.startsWith(PORTAL_PREFIX);
    let b = await current();
    if ('missing' in b && Date.now() - b.at > RECHECK_MS) {
      bundle = undefined;
      b = await current();
    }
    if ('missing' in b) {
      return text(
        503,
        `The web dashboard is not built (${b.missing} has no index.html).\n` +
          'Run `npm run build:web` (npm start does it by itself).\n',
        { 'Retry-After': '5' },
      );
    }
    let rel: string;
    try {
      rel = decodeURIComponent(req.path.slice(portal ? PORTAL_PREFIX.length : DASHBOARD_PREFIX.length));
    } catch {
      return text(404, 'Not found\n');
    }
    const file = rel === '' || portal ? undefined : b.files.get(rel);
    if (file && !file.type.startsWith('text/html')) return fileReply(req, file);
    // A name with an extension is a file that does not exist; anything else is a page of the SPA.
    if (!file && /\.[A-Za-z0-9]+$/.test(rel)) return text(404, 'Not found\n');
    // A page load: at most every 2 s, see whether web/dist was rebuilt (one async stat), and serve that build.
    if (Date.now() - b.checked > RECHECK_MS) {
      b.checked = Date.now();
      const stamp = await buildStamp(b.dir);
      if (stamp !== undefined && stamp !== b.stamp) {
        // undefined: a build is being swapped in; keep the old one meanwhile
        bundle = undefined;
        return handle(req);
      }
    }
    const page = portal ? b.files.get('portal.html') : undefined;
    if (portal && !page) return text(404, 'Not found\n');
    return fileReply(req, file ?? page ?? b.files.get('index.html')!);
  }

  return {
    handle,
    /** Reads the files now (at start), so the first visitor does not wait for it. */
    preload: async (): Promise<void> => {
      await current();
    },
  };
}

/** Mounts GET /dashboard, /dashboard/*, /portal and /portal/* (call before the catch-all fallback). */
export function mountDashboard(server: HttpServer, dir?: string): ReturnType<typeof dashboardFiles> {
  const files = dashboardFiles(dir);
  server.mount({ method: 'get', pattern: '/dashboard', bodyLimit: 0, handler: files.handle });
  server.mount({ method: 'get', pattern: '/dashboard/*', bodyLimit: 0, handler: files.handle });
  server.mount({ method: 'get', pattern: '/portal', bodyLimit: 0, handler: files.handle });
  server.mount({ method: 'get', pattern: '/portal/*', bodyLimit: 0, handler: files.handle });
  return files;
}
