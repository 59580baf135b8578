// Updates (docs/releases.md) in the SDK tests: a release published on the harness server through its
// API with a real multi-MB artifact, proxies that serve a download spoiled in one way, and the checks
// of what an SDK's update program printed.
//
// The program's protocol (test/sdk/programs/update.*): arguments CONFIG KEY HWID DIR; env
// KW_DL_TAMPER_URLS (JSON mode -> base URL of a proxy). It activates KEY on HWID, then prints one JSON
// object a line:
//   {"step": "none", "upgrade": null}                       check_update("1.1.0", stable, linux, x64)
//   {"step": "offer", "version", "channel", "artifacts": [{"filename", "platform", "arch", "size"}]}
//                                                            check_update("1.0.0", stable, linux, x64)
//   {"step": "download", "path", "calls", "last": [received, total], "monotonic"}
//                                                            download_update(first artifact, DIR/app.bin)
//   {"step": "tamper", "mode", "error", "reason", "code", "files"} for each proxy mode: the same
//                                                            artifact with its url's origin replaced by the
//                                                            proxy's, downloaded to DIR/<mode>/app.bin;
//                                                            `error` the SDK error type's name, `files`
//                                                            what DIR/<mode> holds afterwards
// and exits 0 (1 on anything unexpected, with the error on stderr).
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { expect } from 'vitest';
import { Api } from './http.js';
import type { SdkHarness } from './sdk-harness.js';

export const UPDATE_VERSION = '1.1.0';
export const UPDATE_FILENAME = 'app-linux-x64.bin';
/** Larger than any SDK's chunk and than one socket read: the download must stream. */
const UPDATE_BYTES = 3 * 1024 * 1024 + 123;

export interface PublishedUpdate {
  bytes: Buffer;
  sha512: string;
  /** keywarden.json of app PLAIN with its app_id (artifact signatures name the application). */
  config: string;
  /** KW_DL_TAMPER_URLS for the program. */
  tamperUrls: Record<string, string>;
  close(): Promise<void>;
}

/** Proxies to the server that spoil a download: `flip` one byte (same length), `truncate` the last KiB. */
async function startDownloadTamperProxies(
  base: string,
): Promise<{ urls: Record<string, string>; close(): Promise<void> }> {
  const target = new URL(base);
  const servers: http.Server[] = [];
  const urls: Record<string, string> = {};
  for (const mode of ['flip', 'truncate'] as const) {
    const server = http.createServer((req, res) => {
      const up = http.request(
        { host: target.hostname, port: target.port, method: req.method, path: req.url, headers: { accept: '*/*' } },
        (answer) => {
          const chunks: Buffer[] = [];
          answer.on('data', (c: Buffer) => chunks.push(c));
          answer.on('end', () => {
            let body = Buffer.concat(chunks);
            if (answer.statusCode === 200 && mode === 'flip') body[Math.floor(body.length / 2)]! ^= 0x40;
            if (answer.statusCode === 200 && mode === 'truncate') body = body.subarray(0, body.length - 1024);
            res.writeHead(answer.statusCode ?? 502, {
              'content-type': answer.headers['content-type'] ?? 'application/octet-stream',
              'content-length': String(body.length),
            });
            res.end(body);
          });
          answer.on('error', () => res.destroy());
        },
      );
      up.on('error', () => res.destroy());
      req.pipe(up);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.push(server);
    urls[mode] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }
  return {
    urls,
    close: () =>
      Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve())))).then(() => undefined),
  };
}

/**
 * Publishes release 1.1.0 (stable) of app PLAIN with one random artifact for linux/x64, uploaded
 * through PUT /api/releases/{id}/artifacts/{filename}, and starts the tampering proxies.
 */
export async function publishUpdate(h: SdkHarness, dir: string): Promise<PublishedUpdate> {
  const appId = (JSON.parse(h.env.KW_APP_IDS!) as Record<string, string>).PLAIN!;
  const owner = new Api(h.env.KW_BASE_URL!, h.env.KW_OWNER_TOKEN);
  const created = await owner.post(`/api/apps/${appId}/releases`, {
    version: UPDATE_VERSION,
    channel: 'stable',
    notes: 'Faster and safer.',
  });
  if (created.status !== 201) throw new Error(`release refused: ${created.status} ${JSON.stringify(created.body)}`);
  const bytes = randomBytes(UPDATE_BYTES);
  const up = await owner.call(
    'PUT',
    `/api/releases/${created.body.id}/artifacts/${UPDATE_FILENAME}?platform=linux&arch=x64`,
    undefined,
    { rawBody: bytes, headers: { 'content-type': 'application/octet-stream' } },
  );
  if (up.status !== 201) throw new Error(`upload refused: ${up.status} ${JSON.stringify(up.body)}`);
  const sha512 = createHash('sha512').update(bytes).digest('hex');
  expect(up.body.sha512).toBe(sha512);
  const published = await owner.post(`/api/releases/${created.body.id}/publish`, {});
  if (published.status !== 200)
    throw new Error(`publish refused: ${published.status} ${JSON.stringify(published.body)}`);
  const config = path.join(dir, 'keywarden-updates.json');
  const plain = JSON.parse(fs.readFileSync(h.env.KW_CONFIG_PLAIN!, 'utf8')) as Record<string, unknown>;
  fs.writeFileSync(config, JSON.stringify({ ...plain, app_id: appId }, null, 2) + '\n');
  const proxies = await startDownloadTamperProxies(h.env.KW_BASE_URL!);
  return { bytes, sha512, config, tamperUrls: proxies.urls, close: proxies.close };
}

/** What an update program must have printed and written (see the protocol above). */
export function expectUpdateRun(
  r: { code: number | null; out: string },
  u: PublishedUpdate,
  dir: string,
  errorType: string,
): void {
  expect(r.code, r.out).toBe(0);
  const lines = r.out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, any>);
  const step = (name: string) => lines.filter((l) => l.step === name);
  expect(step('none'), r.out).toEqual([{ step: 'none', upgrade: null }]);
  expect(step('offer'), r.out).toEqual([
    {
      step: 'offer',
      version: UPDATE_VERSION,
      channel: 'stable',
      artifacts: [{ filename: UPDATE_FILENAME, platform: 'linux', arch: 'x64', size: u.bytes.length }],
    },
  ]);
  const [download] = step('download');
  expect(download, r.out).toBeDefined();
  expect(path.resolve(download!.path)).toBe(path.resolve(dir, 'app.bin'));
  expect(download!.calls).toBeGreaterThan(1);
  expect(download!.last).toEqual([u.bytes.length, u.bytes.length]);
  expect(download!.monotonic).toBe(true);
  const written = fs.readFileSync(path.join(dir, 'app.bin'));
  expect(written.length).toBe(u.bytes.length);
  expect(createHash('sha512').update(written).digest('hex')).toBe(u.sha512);
  expect(fs.readdirSync(dir).filter((f) => !fs.statSync(path.join(dir, f)).isDirectory())).toEqual(['app.bin']);
  const tampered = Object.fromEntries(step('tamper').map((l) => [l.mode, l]));
  expect(tampered, r.out).toEqual({
    flip: {
      step: 'tamper',
      mode: 'flip',
      error: errorType,
      reason: 'sha512_mismatch',
      code: 'verification',
      files: [],
    },
    truncate: {
      step: 'tamper',
      mode: 'truncate',
      error: errorType,
      reason: 'size_mismatch',
      code: 'verification',
      files: [],
    },
  });
  for (const mode of ['flip', 'truncate']) expect(fs.readdirSync(path.join(dir, mode))).toEqual([]);
}
