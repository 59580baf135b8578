// sdk/vectors/artifacts.json: every case downloaded for real (from a local HTTP server serving the
// case's bytes) through Client.downloadUpdate, which must accept it or refuse it with the reason the
// case names, leaving nothing behind when it refuses; and the refusals of a link.
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, UpdateError, type Artifact } from '../src/index.js';

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../vectors');
const v = JSON.parse(fs.readFileSync(path.join(dir, 'artifacts.json'), 'utf8'));
const files = new Map<string, Buffer>();
let server: http.Server;
let base: string;
let tmp: string;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-ts-updates-'));
  server = http.createServer((req, res) => {
    const body = files.get(req.url ?? '');
    if (!body) {
      res.writeHead(403, { 'content-type': 'application/json' }).end('{"detail":"Download link expired"}');
      return;
    }
    res.writeHead(200, { 'content-length': String(body.length) }).end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(tmp, { recursive: true, force: true });
});

const client = (appId: string) =>
  Client.fromConfig({ format: 1, base_url: base, api_key: 'k', app_id: appId, response_keys: v.pinned_keys });
const artifact = (c: any, url: string): Artifact => ({
  appId: c.app_id,
  version: c.version,
  ...c.artifact,
  platform: 'any',
  arch: 'any',
  url,
  urlExpiresAt: null,
});
const refusal = async (p: Promise<unknown>) => {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(UpdateError);
  return e as UpdateError;
};

describe('updates', () => {
  it('artifacts.json: every case downloads or is refused for its reason, nothing left behind', async () => {
    const seen = new Set<string>();
    for (const [i, c] of (v.cases as any[]).entries()) {
      const d = fs.mkdtempSync(path.join(tmp, 'case-'));
      const bytes = Buffer.from(c.downloaded, 'base64');
      files.set(`/dl/${i}`, bytes);
      const target = path.join(d, c.artifact.filename);
      const progress: [number, number][] = [];
      const run = client(c.app_id).downloadUpdate(artifact(c, `${base}/dl/${i}`), target, (r, t) =>
        progress.push([r, t]),
      );
      if (c.valid) {
        expect(await run, c.name).toBe(target);
        expect(fs.readFileSync(target).equals(bytes), c.name).toBe(true);
        expect(fs.readdirSync(d)).toEqual([c.artifact.filename]);
        if (bytes.length) expect(progress.at(-1)).toEqual([bytes.length, bytes.length]);
      } else {
        const e = await refusal(run);
        expect({ code: e.code, reason: e.reason }, c.name).toEqual({ code: 'verification', reason: c.reason });
        expect(fs.readdirSync(d), c.name).toEqual([]);
        seen.add(c.reason);
      }
    }
    expect([...seen].sort()).toEqual([...v.reasons].sort());
  });

  it('a refused link is download_failed (server, 403, its detail) and the existing target is kept', async () => {
    const c = v.cases[0];
    const d = fs.mkdtempSync(path.join(tmp, 'gone-'));
    fs.writeFileSync(path.join(d, 'app.bin'), 'the running version');
    const e = await refusal(client(c.app_id).downloadUpdate(artifact(c, `${base}/gone`), path.join(d, 'app.bin')));
    expect({ code: e.code, reason: e.reason, status: e.status, detail: e.detail }).toEqual({
      code: 'server',
      reason: 'download_failed',
      status: 403,
      detail: 'Download link expired',
    });
    expect(fs.readdirSync(d)).toEqual(['app.bin']);
    expect(fs.readFileSync(path.join(d, 'app.bin'), 'utf8')).toBe('the running version');
  });

  it('an unreachable link is a network download_failed', async () => {
    const c = v.cases[0];
    const d = fs.mkdtempSync(path.join(tmp, 'down-'));
    const e = await refusal(client(c.app_id).downloadUpdate(artifact(c, 'http://127.0.0.1:9/x'), path.join(d, 'a')));
    expect({ code: e.code, reason: e.reason }).toEqual({ code: 'network', reason: 'download_failed' });
    expect(fs.readdirSync(d)).toEqual([]);
  });
});
