// The container image (Dockerfile) built and run the way an operator runs it, without a registry or a
// container runtime (test/deploy/image-harness.ts): buildah builds the Dockerfile on a Debian 13 +
// Node.js 24 base made here, and runs the image's own ENTRYPOINT/CMD (tini, `keywarden migrate`,
// `keywarden serve`) as the image's non-root user with a host folder as /data. From outside: /healthz
// and the image's HEALTHCHECK, an owner sign-in, an app and keys made through the API, a key activated
// by the TypeScript SDK (signature verified), SIGTERM to the init (the server drains and exits 0,
// PostgreSQL stopped cleanly), and a second container on the same /data where that key still verifies
// under the same published key. Costs on the 2-core CI machine under load: 6 minutes on a fresh machine
// (the base image 1.5 min, the image 3.7 min), 70 to 100 s when the sources changed, 20 to 50 s when
// nothing did (docs/deploy.md#how-ci-tests-the-image).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, type KeywardenConfig } from '../../sdk/typescript/src/index.js';
import { clientConfig } from '../../src/modules/apps/sdk-archive.js';
import { Api } from '../helpers/http.js';
import { requireToolchain } from '../helpers/toolchain.js';
import {
  buildImage,
  ensureBaseImage,
  imageBytes,
  imageConfig,
  imageToolsMissing,
  NODE24_RELEASE,
  removeContainer,
  runImage,
  buildah,
  type Container,
} from './image-harness.js';

const missing = imageToolsMissing();
const ready = requireToolchain(`container image build: ${missing ?? ''}`, missing === undefined);
const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TAG = 'localhost/keywarden:test';
const OWNER = { username: 'owner', password: 'image-owner-pass-1' };
const HWID = 'image-test-hwid-0001';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address() as net.AddressInfo;
      s.close(() => resolve(a.port));
    });
  });
}

const json = (l: string): Record<string, unknown> => {
  try {
    return JSON.parse(l) as Record<string, unknown>;
  } catch {
    return {};
  }
};
const logged = (msg: string) => (l: string) => json(l).msg === msg;

describe.skipIf(!ready)('container image', { timeout: 900_000 }, () => {
  let dataDir: string;
  let baseRef: string;
  const containers: Container[] = [];
  const costs: string[] = [];
  let port: number;
  let base: string;
  let config: KeywardenConfig;
  let key: string;

  beforeAll(async () => {
    const b = await ensureBaseImage((m) => console.log(`image test: ${m}`));
    baseRef = b.ref;
    costs.push(b.ms > 0 ? `base image made in ${(b.ms / 1000).toFixed(0)} s` : 'base image cached');
    const logFile = path.join(os.tmpdir(), 'keywarden-image-build.log');
    const ms = await buildImage(REPO, baseRef, TAG, logFile);
    costs.push(`image built in ${(ms / 1000).toFixed(0)} s`);
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-image-data-'));
    // What a named volume gets from the image's /data: the image's user owns it.
    fs.chownSync(dataDir, 10001, 10001);
    fs.chmodSync(dataDir, 0o700);
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
  }, 900_000);

  afterAll(async () => {
    for (const c of containers) {
      await c.kill();
      await removeContainer(c.name);
    }
    if (dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
    console.log(`image test: ${costs.join('; ')}`);
  }, 120_000);

  const start = async () => {
    const c = await runImage(TAG, dataDir, {
      PORT: String(port),
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password,
      // Here tini is not PID 1 (buildah's chroot shares the host's process table): as a subreaper it
      // still reaps what the database leaves behind, as it would as PID 1 under a runtime.
      TINI_SUBREAPER: '1',
    });
    containers.push(c);
    await c.waitFor(logged('server.listening'), 'the server listened');
    return c;
  };

  it('is Debian 13 with Node.js 24, runs as a non-root user with tini, /data a volume, a HEALTHCHECK', async () => {
    const cfg = await imageConfig(TAG);
    expect(cfg.User).toBe('keywarden');
    expect(cfg.Entrypoint?.[0]).toBe('/usr/bin/tini');
    expect(cfg.Cmd).toEqual(['serve']);
    expect(Object.keys(cfg.Volumes ?? {})).toEqual(['/data']);
    expect(cfg.Env).toContain('DATA_DIR=/data');
    expect(Object.keys(cfg.ExposedPorts ?? {})).toEqual(['8080/tcp']);
    expect(cfg.Healthcheck?.Test.join(' ')).toContain('/healthz');
    const ctr = await buildah(['from', '--quiet', TAG]);
    try {
      const root = await buildah(['mount', ctr]);
      expect(fs.readFileSync(path.join(root, 'etc/debian_version'), 'utf8')).toMatch(/^13\./);
      // npm ci built nothing natively: no node-gyp output anywhere, and no compiler to build with
      const built: string[] = [];
      const walk = (d: string) => {
        for (const e of fs.readdirSync(d, { withFileTypes: true })) {
          const p = path.join(d, e.name);
          if (e.isDirectory() && !e.isSymbolicLink()) {
            if (e.name === 'Release' && path.basename(d) === 'build') built.push(p);
            else walk(p);
          }
        }
      };
      walk(path.join(root, 'app/node_modules'));
      expect(built).toEqual([]);
      for (const cc of ['usr/bin/cc', 'usr/bin/gcc', 'usr/bin/make', 'usr/bin/python3'])
        expect(fs.existsSync(path.join(root, cc)), cc).toBe(false);
      // only the uWebSockets.js binary this Node.js loads is kept
      expect(
        fs.readdirSync(path.join(root, 'app/node_modules/uWebSockets.js')).filter((f) => f.endsWith('.node')),
      ).toEqual(['uws_linux_x64_137.node']);
    } finally {
      await buildah(['umount', ctr]).catch(() => undefined);
      await buildah(['rm', ctr]);
    }
    const total = await imageBytes(TAG);
    const own = total - (await imageBytes(baseRef));
    costs.push(`image ${(total / 1e6).toFixed(0)} MB, of which ${(own / 1e6).toFixed(0)} MB on top of the base`);
    // docs/deploy.md states what the image weighs; this keeps it honest
    expect(own).toBeLessThan(330e6);
  });

  it('migrates, serves, answers /healthz and its HEALTHCHECK; an owner makes an app and keys; the SDK activates one', async () => {
    const c = await start();
    const runtime = json(c.lines.find(logged('server.runtime'))!);
    expect(runtime.node).toBe(NODE24_RELEASE);
    expect(runtime.uws).toBe('20.57.0');
    // koffi's prebuilt binary loads too (the allocator trim calls glibc through it)
    expect(c.lines.filter((l) => l.includes('memory.trim_unavailable'))).toEqual([]);
    // `keywarden migrate` ran before the server, as its own process
    const migrated = json(c.lines.find(logged('db.migrated'))!);
    expect((migrated.applied as string[]).length).toBeGreaterThan(0);
    expect(migrated.pid).not.toBe(runtime.pid);

    const health = await fetch(`${base}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: 'ok' });
    const hc = (await imageConfig(TAG)).Healthcheck!.Test;
    expect(hc[0]).toBe('CMD');
    expect(await c.exec(hc.slice(1))).toMatchObject({ code: 0 });
    // the server runs as the image's user, never as root, and so does its PostgreSQL
    const pgOwner = fs.statSync(path.join(dataDir, 'pg', 'PG_VERSION')).uid;
    expect(pgOwner).toBe(10001);

    const owner = await new Api(base).signIn(OWNER.username, OWNER.password);
    const app = await owner.post('/api/apps', { name: 'Image App' });
    expect(app.status).toBe(200);
    const keys = await owner.post(`/api/apps/${app.body.id}/licenses`, {
      amount: 2,
      duration: 30,
      unit: 'days',
      level: 2,
    });
    expect(keys.status).toBe(200);
    key = (keys.body as { key: string }[])[0]!.key;
    const published = (
      (await (await fetch(`${base}/api/client/keys`)).json()) as {
        keys: { kid: string; public_key: string }[];
      }
    ).keys;
    expect(published).toHaveLength(1);
    config = clientConfig(
      {
        name: app.body.name,
        apiKey: app.body.api_key,
        apiSecret: app.body.api_secret,
        version: app.body.version,
        requireSignature: app.body.require_signature,
      },
      published,
      base,
    ) as KeywardenConfig;
    const client = Client.fromConfig(config);
    await client.init();
    const lic = await client.activateLicense(key, HWID);
    expect(lic.level).toBe(2);

    // docker stop: SIGTERM to PID 1 (tini), passed on to the server, which drains and exits 0
    expect(await c.stop()).toBe(0);
    expect(c.lines.some(logged('server.stopped'))).toBe(true);
    expect(c.lines.some(logged('db.embedded.stopped'))).toBe(true);
    // PostgreSQL shut down cleanly (it removes its PID file then)
    expect(fs.existsSync(path.join(dataDir, 'pg', 'postmaster.pid'))).toBe(false);
    // the data stayed in the volume, none in the container
    expect(fs.readdirSync(path.join(dataDir, 'secrets')).sort()).toEqual([
      'license-hash.key',
      'response-signing-k1.seed',
      'two-factor.key',
    ]);
    await expect(c.exec(hc.slice(1))).resolves.toMatchObject({ code: 1 });
  });

  it('a new container on the same /data keeps the data and the keys: the key verifies again', async () => {
    expect(key).toBeDefined();
    const c = await start();
    // nothing left to migrate, no owner to create
    expect(json(c.lines.find(logged('db.migrated')) ?? '{}').applied ?? []).toEqual([]);
    expect(c.lines.some(logged('account.owner_created'))).toBe(false);
    const owner = await new Api(base).signIn(OWNER.username, OWNER.password);
    expect(((await owner.get('/api/apps')).body as { name: string }[]).map((a) => a.name)).toEqual(['Image App']);
    // the config saved before carries the first run's public key: answers must verify under it
    const client = Client.fromConfig(config);
    await client.init();
    expect((await client.activateLicense(key, HWID)).level).toBe(2);
    expect(await c.stop()).toBe(0);
  });
});
