// How the server serves the built dashboard (src/platform/http/static.ts): /dashboard redirects,
// pages get index.html with a strict CSP and no-cache, hashed assets are immutable (gzip when
// asked), a missing asset is 404 (never HTML), and a missing build is a clear 503.
// scripts/build-web.mjs rebuilds only when an input is newer than the build.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { dashboardFiles, DASHBOARD_CSP } from '../../src/platform/http/static.js';
import { ensureWebBuild, webStaleReason, WEB_DIST } from '../../scripts/build-web.mjs';

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self' ws: wss:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

describe("the dashboard's static files", () => {
  let t: TestServer;
  beforeAll(async () => {
    await ensureWebBuild((m) => console.warn(m));
    t = await startTestServer();
  }, 120_000);
  afterAll(() => t?.close());

  const get = (p: string, headers: Record<string, string> = {}) =>
    fetch(`${t.base}${p}`, { headers, redirect: 'manual' });

  it('redirects /dashboard to /dashboard/', async () => {
    const r = await get('/dashboard');
    expect(r.status).toBe(308);
    expect(r.headers.get('location')).toBe('/dashboard/');
  });

  it('serves index.html with the strict CSP, no-cache and no inline script', async () => {
    const r = await get('/dashboard/');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(r.headers.get('content-security-policy')).toBe(CSP);
    expect(DASHBOARD_CSP).toBe(CSP);
    expect(r.headers.get('cache-control')).toBe('no-cache');
    expect(r.headers.get('x-content-type-options')).toBe('nosniff');
    expect(r.headers.get('referrer-policy')).toBe('same-origin');
    expect(r.headers.get('x-frame-options')).toBe('DENY');
    const html = await r.text();
    expect(html).toContain('<div id="root"></div>');
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attrs, body] of scripts) {
      expect(attrs).toMatch(/\bsrc="\/dashboard\/assets\/[^"]+\.js"/);
      expect(body!.trim()).toBe('');
    }
    expect(html).not.toMatch(/<style\b|\sstyle="/); // style-src 'self': no inline styles either
  });

  it('answers every page path of the SPA with index.html', async () => {
    const index = await (await get('/dashboard/')).text();
    for (const p of [
      '/dashboard/apps/0b7c3a2e-0000-4000-8000-000000000000/licenses',
      '/dashboard/team',
      '/dashboard/account',
    ]) {
      const r = await get(p);
      expect(r.status, p).toBe(200);
      expect(await r.text()).toBe(index);
      expect(r.headers.get('content-security-policy')).toBe(CSP);
    }
  });

  /** A GET over node:http, which (unlike fetch) neither asks for nor decodes compression by itself. */
  const rawGet = async (p: string, headers: Record<string, string> = {}) => {
    const { request } = await import('node:http');
    return new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
      request(`${t.base}${p}`, { headers }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
      })
        .on('error', reject)
        .end();
    });
  };

  it('serves hashed assets as immutable, gzipped when the browser accepts it', async () => {
    const html = await (await get('/dashboard/')).text();
    const js = /src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(html)![1]!;
    const plain = await rawGet(js);
    expect(plain.status).toBe(200);
    expect(plain.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body).toEqual(fs.readFileSync(path.join(WEB_DIST, js.replace('/dashboard/', ''))));
    const zipped = await rawGet(js, { 'accept-encoding': 'gzip, deflate, br' });
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.headers['vary']).toBe('Accept-Encoding');
    expect(zipped.body.length).toBeLessThan(plain.body.length / 2);
    expect(gunzipSync(zipped.body)).toEqual(plain.body);
  });

  it('answers 404 for a missing file, never the page', async () => {
    for (const p of ['/dashboard/assets/index-gone.js', '/dashboard/nope.css', '/dashboard/%E0%A4%A.js']) {
      const r = await get(p);
      expect(r.status, p).toBe(404);
      expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    }
  });

  it('answers a clear 503 while no build exists, and serves the build once it appears', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-web-dist-'));
    const files = dashboardFiles(dir);
    const req = (p: string) => ({
      method: 'get' as const,
      path: p,
      query: new URLSearchParams(),
      headers: {},
      ip: '127.0.0.1',
      params: {},
      body: Buffer.alloc(0),
    });
    const missing = await files.handle(req('/dashboard/'));
    expect(missing.status).toBe(503);
    expect(String(missing.body)).toContain('npm run build:web');
    expect(missing.headers['Retry-After']).toBe('5');
    fs.writeFileSync(path.join(dir, 'index.html'), '<!doctype html><div id="root"></div>');
    await new Promise((r) => setTimeout(r, 2_100)); // a missing build is looked for again after 2 s
    const found = await files.handle(req('/dashboard/team'));
    expect(found.status).toBe(200);
    expect(String(found.body)).toContain('root');
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('scripts/build-web.mjs', () => {
  it('calls a build stale when it is missing or older than any input, and fresh otherwise', async () => {
    const web = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-web-src-'));
    const at = (file: string, seconds: number) => {
      fs.mkdirSync(path.dirname(path.join(web, file)), { recursive: true });
      if (!fs.existsSync(path.join(web, file))) fs.writeFileSync(path.join(web, file), 'x');
      const d = new Date(1_800_000_000_000 + seconds * 1000);
      fs.utimesSync(path.join(web, file), d, d);
    };
    at('index.html', 0);
    at('src/main.tsx', 0);
    at('src/lib/rules.test.ts', 50); // tests are not part of the bundle
    expect(await webStaleReason(web)).toBe('no build yet');
    at('dist/index.html', 10);
    at('dist/.build-stamp', 10);
    for (const dir of ['', 'src', 'src/lib', 'dist']) {
      const d = new Date(1_800_000_000_000);
      fs.utimesSync(path.join(web, dir), d, d);
    }
    expect(await webStaleReason(web)).toBeUndefined();
    at('src/lib/rules.ts', 20);
    expect(await webStaleReason(web)).toBe('src/lib/rules.ts changed since the last build');
    fs.rmSync(web, { recursive: true, force: true });
  });

  it('leaves a fresh web/dist alone', async () => {
    await ensureWebBuild();
    expect(await webStaleReason()).toBeUndefined();
    const stamp = fs.statSync(path.join(WEB_DIST, '.build-stamp')).mtimeMs;
    await ensureWebBuild();
    expect(fs.statSync(path.join(WEB_DIST, '.build-stamp')).mtimeMs).toBe(stamp);
  });
});
