// Releases and updates (docs/releases.md) against a real server: releases CRUD and SemVer order,
// streamed artifact uploads (a multi-MB file, hashes checked independently), the artifact signature,
// publish and yank, the client's upgrade check (channels, platform/arch, entitlements, both
// `expired_updates` rules, banned and deleted keys, encryption), download links (Range, ETag, expiry
// on the server's clock, revocation) and the member download, API token scopes.
import { createHash, createPublicKey, randomBytes, verify } from 'node:crypto';
import http from 'node:http';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture, type AppFixture } from '../../helpers/fixture.js';
import { decryptEnc, hwid } from '../../helpers/client.js';
import { TestClock } from '../../helpers/clock.js';
import { Subscriber } from '../../helpers/live-subscriber.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';

let t: TestServer;
let artifactDir: string;
let receiver: WebhookReceiver<{ path: string; body: string }>;
const clock = new TestClock();
beforeAll(async () => {
  artifactDir = await mkdtemp(path.join(tmpdir(), 'kw-artifacts-'));
  receiver = await startWebhookReceiver();
  t = await startTestServer(
    { TRUSTED_PROXIES: '127.0.0.1', ARTIFACT_DIR: artifactDir, ARTIFACT_MAX_MB: '8', ALLOW_PRIVATE_WEBHOOKS: '1' },
    { clock },
  );
});
afterAll(async () => {
  await t.close();
  await receiver.close();
  await rm(artifactDir, { recursive: true, force: true });
});

const MINUTE = 60_000;
const HOUR = 3_600_000;

async function upload(f: AppFixture, releaseId: string, filename: string, data: Buffer, query = '') {
  return f.owner.call('PUT', `/api/releases/${releaseId}/artifacts/${filename}${query}`, undefined, {
    rawBody: data,
    headers: { 'content-type': 'application/octet-stream' },
  });
}

async function release(f: AppFixture, body: Record<string, unknown>, files: [string, Buffer, string?][] = []) {
  const r = await f.owner.post(`/api/apps/${f.app.id}/releases`, body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  for (const [name, data, query] of files) {
    const u = await upload(f, r.body.id, name, data, query ?? '');
    expect(u.status, JSON.stringify(u.body)).toBe(201);
  }
  return r.body as { id: string; version: string };
}

async function publish(f: AppFixture, body: Record<string, unknown>, files: [string, Buffer, string?][]) {
  const r = await release(f, body, files);
  const p = await f.owner.post(`/api/releases/${r.id}/publish`);
  expect(p.status, JSON.stringify(p.body)).toBe(200);
  return p.body;
}

/** An activated client session on a fresh key. */
async function activated(
  f: AppFixture,
  keyBody: Record<string, unknown> = {},
  initExtra: Record<string, unknown> = {},
) {
  const [key] = await f.keys(1, keyBody);
  const c = f.client();
  c.now = () => clock.now();
  const session = await f.session(c, initExtra);
  const r = await c.post('/api/client/license', { session, license: key, hwid: hwid(Math.random()) });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  const upgrade = (body: Record<string, unknown>) =>
    c.post('/api/client/releases/upgrade', { session, version: '1.0.0', ...body });
  return { c, session, key: key!, upgrade };
}

async function licenseId(f: AppFixture, key: string): Promise<string> {
  const [row] = await f.sql<{ id: string }>(`select id from license_keys where app_id = $1 and key_preview = $2`, [
    f.app.id,
    `${key.slice(0, 4)}****${key.slice(-4)}`,
  ]);
  return row!.id;
}

const sha = (alg: string, b: Buffer) => createHash(alg).update(b).digest('hex');

describe('releases on the dashboard', () => {
  it('creates drafts, orders by SemVer precedence, refuses a taken or malformed version', async () => {
    const f = await appFixture(t);
    for (const version of [
      '1.0.0',
      '1.10.0',
      '1.2.0',
      '1.10.0-rc.1',
      '1.10.0-beta.11',
      '1.10.0-beta.2',
      '2.0.0+build.5',
    ])
      await release(f, { version, channel: version.includes('-') ? 'beta' : 'stable' });
    const list = await f.owner.get(`/api/apps/${f.app.id}/releases`);
    expect(list.body.map((r: { version: string }) => r.version)).toEqual([
      '2.0.0+build.5',
      '1.10.0',
      '1.10.0-rc.1',
      '1.10.0-beta.11',
      '1.10.0-beta.2',
      '1.2.0',
      '1.0.0',
    ]);
    expect(list.body[0]).toMatchObject({ status: 'draft', published_at: null, artifacts: [], channel: 'stable' });
    const taken = await f.owner.post(`/api/apps/${f.app.id}/releases`, { version: '1.2.0' });
    expect([taken.status, taken.body]).toEqual([409, { detail: 'Version already exists' }]);
    for (const version of ['1.2', 'v1.2.3', '01.2.3', '1.2.3-', ''] as const) {
      const bad = await f.owner.post(`/api/apps/${f.app.id}/releases`, { version });
      expect([version, bad.status, bad.body.detail?.[0]?.loc]).toEqual([version, 422, ['body', 'version']]);
    }
    const badChannel = await f.owner.post(`/api/apps/${f.app.id}/releases`, { version: '3.0.0', channel: 'nightly' });
    expect(badChannel.status).toBe(422);
    const unknownEnt = await f.owner.post(`/api/apps/${f.app.id}/releases`, { version: '3.0.0', entitlements: ['x'] });
    expect(unknownEnt.status).toBe(422);
  });

  it('streams a multi-MB upload to disk with its hashes and an Ed25519 signature; publish and yank rules', async () => {
    const f = await appFixture(t);
    const r = await release(f, { version: '2.1.0', notes: 'Faster' });
    const noArtifact = await f.owner.post(`/api/releases/${r.id}/publish`);
    expect([noArtifact.status, noArtifact.body.detail?.[0]?.loc]).toEqual([422, ['body', 'artifacts']]);
    const big = randomBytes(6 * 1024 * 1024 + 123);
    const u = await upload(f, r.id, 'app-2.1.0.tar.gz', big, '?platform=linux&arch=x86_64');
    expect(u.status, JSON.stringify(u.body)).toBe(201);
    expect(u.body).toMatchObject({
      filename: 'app-2.1.0.tar.gz',
      platform: 'linux',
      arch: 'x86_64',
      size: big.length,
      sha256: sha('sha256', big),
      sha512: sha('sha512', big),
      kid: 'k1',
    });
    const keys = (await f.owner.get('/api/client/keys')).body.keys as { kid: string; public_key: string }[];
    const pub = createPublicKey({
      key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(keys[0]!.public_key, 'base64').toString('base64url') },
      format: 'jwk',
    });
    const message = `kwart1.${f.app.id}.2.1.0.app-2.1.0.tar.gz.${sha('sha512', big)}`;
    expect(verify(null, Buffer.from(message), pub, Buffer.from(u.body.signature, 'base64'))).toBe(true);
    // The same filename replaces it while a draft; the old file leaves the disk.
    const small = Buffer.from('replacement');
    const again = await upload(f, r.id, 'app-2.1.0.tar.gz', small);
    expect(again.body).toMatchObject({ size: small.length, platform: 'any', arch: 'any' });
    expect((await f.owner.get(`/api/releases/${r.id}`)).body.artifacts).toHaveLength(1);
    expect((await readdir(artifactDir)).filter((n) => n !== '.incoming')).toContain(again.body.id);
    expect(await readdir(artifactDir)).not.toContain(u.body.id);
    const re = await upload(f, r.id, 'app-2.1.0.tar.gz', big);
    expect(re.status).toBe(201);
    // Over ARTIFACT_MAX_MB (8 here): 413, nothing kept.
    const over = await upload(f, r.id, 'huge.bin', Buffer.alloc(9 * 1024 * 1024));
    expect([over.status, over.body]).toEqual([413, { detail: 'Payload too large' }]);
    expect(await readdir(path.join(artifactDir, '.incoming'))).toEqual([]);
    for (const bad of ['a%20b', 'a%2Fb', 'x'.repeat(256)]) {
      const b = await upload(f, r.id, bad, small);
      expect([bad, b.status]).toEqual([bad, 422]);
    }
    expect((await upload(f, r.id, 'x.bin', small, '?platform=Linux')).status).toBe(422);
    // The member download gives the very bytes back.
    const got = await f.owner.get(`/api/releases/${r.id}/artifacts/app-2.1.0.tar.gz`);
    expect(got.status).toBe(200);
    expect(sha('sha256', got.raw)).toBe(sha('sha256', big));
    expect(got.headers.get('etag')).toBe(`"${sha('sha256', big)}"`);
    const pub1 = await f.owner.post(`/api/releases/${r.id}/publish`);
    expect(pub1.body).toMatchObject({ status: 'published', version: '2.1.0' });
    expect(pub1.body.published_at).toMatch(/Z$/);
    for (const [method, p, body] of [
      ['PUT', `/api/releases/${r.id}/artifacts/late.bin`, undefined],
      ['DELETE', `/api/releases/${r.id}/artifacts/app-2.1.0.tar.gz`, undefined],
      ['DELETE', `/api/releases/${r.id}`, undefined],
      ['POST', `/api/releases/${r.id}/publish`, {}],
    ] as const) {
      const res = method === 'PUT' ? await upload(f, r.id, 'late.bin', small) : await f.owner.call(method, p, body);
      expect([method, p, res.status, res.body]).toEqual([method, p, 409, { detail: 'Release already published' }]);
    }
    const y = await f.owner.post(`/api/releases/${r.id}/yank`);
    expect(y.body.status).toBe('yanked');
    // A draft goes with its files.
    const d = await release(f, { version: '9.0.0' }, [['d.bin', small]]);
    const draftFile = (await f.owner.get(`/api/releases/${d.id}`)).body.artifacts[0].id;
    expect((await f.owner.delete(`/api/releases/${d.id}`)).status).toBe(200);
    expect(await readdir(artifactDir)).not.toContain(draftFile);
    expect((await f.owner.get(`/api/releases/${d.id}`)).status).toBe(404);
    const logs = await f.owner.get(`/api/apps/${f.app.id}/logs?limit=100`);
    const actions = new Set(
      logs.body.items?.map((l: { action: string }) => l.action) ?? logs.body.map((l: { action: string }) => l.action),
    );
    for (const a of ['release.create', 'release.publish', 'release.yank', 'release.delete'])
      expect(actions).toContain(a);
  });
});

describe('an upload cut short', () => {
  it('leaves nothing behind and the server serving', async () => {
    const f = await appFixture(t);
    const r = await release(f, { version: '1.0.0' });
    const url = new URL(`${t.base}/api/releases/${r.id}/artifacts/cut.bin`);
    await new Promise<void>((resolve) => {
      const req = http.request(url, {
        method: 'PUT',
        headers: { authorization: `Bearer ${f.owner.token}`, 'content-length': String(4 * 1024 * 1024) },
      });
      req.on('error', () => resolve());
      req.write(randomBytes(1024 * 1024), () => setTimeout(() => req.destroy(), 200));
      req.on('close', () => resolve());
    });
    // The server noticed the abort and removed the partial file.
    for (let i = 0; i < 50 && (await readdir(path.join(artifactDir, '.incoming'))).length > 0; i++)
      await new Promise((res) => setTimeout(res, 100));
    expect(await readdir(path.join(artifactDir, '.incoming'))).toEqual([]);
    expect((await f.owner.get(`/api/releases/${r.id}`)).body.artifacts).toEqual([]);
    expect((await upload(f, r.id, 'whole.bin', Buffer.from('ok'))).status).toBe(201);
  });
});

describe('changes to a release', () => {
  it('PATCH changes notes, channel, entitlements; a draft artifact is removed; publishing is a live event', async () => {
    const f = await appFixture(t, { webhook: `${receiver.url}/release-hook` });
    const r = await release(f, { version: '4.0.0' }, [
      ['keep.bin', Buffer.from('k')],
      ['drop.bin', Buffer.from('d')],
    ]);
    const p = await f.owner.patch(`/api/releases/${r.id}`, { notes: 'Later', channel: 'rc' });
    expect(p.body).toMatchObject({ notes: 'Later', channel: 'rc', version: '4.0.0' });
    expect((await f.owner.patch(`/api/releases/${r.id}`, { version: '5.0.0' })).status).toBe(422);
    expect((await f.owner.patch(`/api/releases/${r.id}`, { entitlements: ['nope'] })).status).toBe(422);
    expect((await f.owner.delete(`/api/releases/${r.id}/artifacts/drop.bin`)).status).toBe(200);
    const gone = await f.owner.delete(`/api/releases/${r.id}/artifacts/drop.bin`);
    expect([gone.status, gone.body]).toEqual([404, { detail: 'Artifact not found' }]);
    expect(
      (await f.owner.get(`/api/releases/${r.id}`)).body.artifacts.map((a: { filename: string }) => a.filename),
    ).toEqual(['keep.bin']);
    const sub = await Subscriber.open(t.base, f.owner.token!);
    await sub.subscribe(f.app.id);
    expect((await f.owner.post(`/api/releases/${r.id}/publish`)).status).toBe(200);
    const e = await sub.next((x) => x.type === 'event' && x.event.kind === 'release.published');
    expect(e.event.data).toEqual({ release_id: r.id, version: '4.0.0', channel: 'rc' });
    // ...and a webhook.
    const hit = await receiver.nextHit((h) => h.path === '/release-hook' && h.body.includes('release.published'));
    expect(JSON.parse(hit.body)).toMatchObject({
      event: 'release.published',
      app_id: f.app.id,
      data: { release_id: r.id, version: '4.0.0', channel: 'rc' },
    });
    sub.close();
  });
});

describe('the upgrade check and download links', () => {
  it('offers the highest fitting release with signed, encrypted answers and working links', async () => {
    const f = await appFixture(t);
    const linux = Buffer.from('linux build 1.5');
    const win = Buffer.from('windows build 1.5');
    await publish(f, { version: '1.1.0' }, [['a.bin', Buffer.from('any 1.1')]]);
    await publish(f, { version: '1.5.0', notes: 'n' }, [
      ['app-linux', linux, '?platform=linux&arch=x64'],
      ['app-win.exe', win, '?platform=windows&arch=x64'],
    ]);
    await publish(f, { version: '2.0.0-beta.1', channel: 'beta' }, [['b.bin', Buffer.from('beta')]]);
    await release(f, { version: '3.0.0' }, [['draft.bin', Buffer.from('draft')]]);
    const { c, session, upgrade } = await activated(f, {}, { enc_key: 'k'.repeat(16) });

    const stable = await upgrade({ platform: 'linux', arch: 'x64' });
    expect(stable.status, JSON.stringify(stable.body)).toBe(200);
    expect(stable.body.upgrade).toMatchObject({ version: '1.5.0', channel: 'stable', notes: 'n' });
    const arts = stable.body.upgrade.artifacts;
    expect(arts.map((a: { filename: string }) => a.filename)).toEqual(['app-linux']);
    expect(arts[0]).toMatchObject({ size: linux.length, sha512: sha('sha512', linux), kid: 'k1' });
    expect(Date.parse(arts[0].url_expires_at) - clock.now()).toBeGreaterThan(9 * MINUTE);
    expect(arts[0].url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/dl\//);
    // An arch without a build of 1.5.0 gets 1.1.0's `any` artifact.
    expect((await upgrade({ platform: 'linux', arch: 'arm64' })).body.upgrade.version).toBe('1.1.0');
    expect((await upgrade({ version: '1.5.0', platform: 'linux', arch: 'x64' })).body).toEqual({
      success: true,
      upgrade: null,
    });
    // A beta client is offered the beta; a dev client too; a stable one never.
    expect((await upgrade({ channel: 'beta' })).body.upgrade.version).toBe('2.0.0-beta.1');
    expect((await upgrade({ channel: 'dev', version: '1.9.0' })).body.upgrade.version).toBe('2.0.0-beta.1');
    expect((await upgrade({ channel: 'rc', version: '1.9.0' })).body.upgrade).toBeNull();
    const bad = await upgrade({ version: 'one' });
    expect([bad.status, bad.body.detail?.[0]?.loc]).toEqual([422, ['body', 'version']]);
    // Encrypted when asked (docs/protocol.md 5), like every client answer.
    const enc = await c.post('/api/client/releases/upgrade', {
      session,
      version: '1.0.0',
      platform: 'windows',
      arch: 'x64',
      init_iv: 'iv-1',
    });
    const plain = decryptEnc(enc.body.enc, 'k'.repeat(16), f.app.api_secret, 'iv-1') as {
      upgrade: { artifacts: { url: string; filename: string }[] };
    };
    expect(plain.upgrade.artifacts[0]!.filename).toBe('app-win.exe');

    // The link: whole file, ETag, one Range (206), a range outside the file (416).
    const url = arts[0].url as string;
    const whole = await fetch(url);
    expect(whole.status).toBe(200);
    expect(Buffer.from(await whole.arrayBuffer())).toEqual(linux);
    expect(whole.headers.get('etag')).toBe(`"${sha('sha256', linux)}"`);
    expect(whole.headers.get('accept-ranges')).toBe('bytes');
    expect(whole.headers.get('content-length')).toBe(String(linux.length));
    const part = await fetch(url, { headers: { range: 'bytes=6-10' } });
    expect(part.status).toBe(206);
    expect(part.headers.get('content-range')).toBe(`bytes 6-10/${linux.length}`);
    expect(Buffer.from(await part.arrayBuffer()).toString()).toBe('build');
    const tail = await fetch(url, { headers: { range: 'bytes=-3' } });
    expect(Buffer.from(await tail.arrayBuffer()).toString()).toBe('1.5');
    const outside = await fetch(url, { headers: { range: `bytes=${linux.length}-` } });
    expect(outside.status).toBe(416);
    const stale = await fetch(url, { headers: { range: 'bytes=0-1', 'if-range': '"other"' } });
    expect(stale.status).toBe(200);
    // Forged: 403.
    const forged = await fetch(url.replace(/.$/, (ch) => (ch === 'A' ? 'B' : 'A')));
    expect([forged.status, await forged.json()]).toEqual([403, { detail: 'Download link expired' }]);
    // Counted per artifact and release (ranges from a later byte are the same download).
    const rel = (await f.owner.get(`/api/apps/${f.app.id}/releases`)).body.find(
      (r: { version: string }) => r.version === '1.5.0',
    );
    expect(rel.downloads).toBe(2); // the whole file and the `If-Range` miss
    expect(rel.artifacts.find((a: { filename: string }) => a.filename === 'app-linux').downloads).toBe(2);
    // Expiry on the server's clock: 10 minutes.
    clock.advance(11 * MINUTE);
    const late = await fetch(url);
    expect([late.status, await late.json()]).toEqual([403, { detail: 'Download link expired' }]);
    // Audited once per key, artifact and hour.
    const logs = await f.sql<{ n: string }>(
      `select count(*) n from audit_log where app_id = $1 and action = 'release.download'`,
      [f.app.id],
    );
    expect(Number(logs[0]!.n)).toBe(1);
  });

  it('refuses links of yanked releases and banned or deleted keys; needs an activated session', async () => {
    const f = await appFixture(t);
    const p = await publish(f, { version: '1.2.0' }, [['a.bin', Buffer.from('a')]]);
    const one = await activated(f);
    const two = await activated(f);
    const three = await activated(f);
    const urlOf = async (u: typeof one) => (await u.upgrade({})).body.upgrade.artifacts[0].url as string;
    const [u1, u2, u3] = [await urlOf(one), await urlOf(two), await urlOf(three)];
    expect((await fetch(u1)).status).toBe(200);
    expect(
      (await f.owner.call('PATCH', `/api/licenses/${await licenseId(f, two.key)}/ban`, { banned: true })).status,
    ).toBe(200);
    expect((await fetch(u2)).status).toBe(403);
    expect((await two.upgrade({})).body).toEqual({ detail: 'License key is banned' });
    expect((await f.owner.delete(`/api/licenses/${await licenseId(f, three.key)}`)).status).toBe(200);
    expect((await fetch(u3)).status).toBe(403);
    await f.owner.post(`/api/releases/${p.id}/yank`);
    const y = await fetch(u1);
    expect([y.status, await y.json()]).toEqual([403, { detail: 'Download link expired' }]);
    expect((await one.upgrade({})).body).toEqual({ success: true, upgrade: null });
    const c = f.client();
    c.now = () => clock.now();
    const fresh = await f.session(c);
    const r = await c.post('/api/client/releases/upgrade', { session: fresh, version: '1.0.0' });
    expect([r.status, r.body.detail]).toEqual([
      403,
      'Session not activated. Call /login, /register or /license first.',
    ]);
  });

  it('expired keys: `none` refuses them, `maintain` offers what was published before the expiry', async () => {
    const f = await appFixture(t);
    await publish(f, { version: '1.1.0' }, [['a.bin', Buffer.from('old')]]);
    const u = await activated(f, { duration: 1, unit: 'hours' });
    const link = (await u.upgrade({})).body.upgrade.artifacts[0].url as string;
    // Past the key's expiry, within the link's 10 minutes and the session's 24 hours.
    clock.advance(HOUR - 5 * MINUTE);
    expect((await u.upgrade({})).status).toBe(200);
    clock.advance(6 * MINUTE);
    await publish(f, { version: '1.2.0' }, [['a.bin', Buffer.from('new')]]);
    expect((await u.upgrade({})).body).toEqual({ detail: 'License expired' });
    expect((await fetch(link)).status).toBe(403);
    expect((await f.owner.patch(`/api/apps/${f.app.id}`, { expired_updates: 'maintain' })).body.expired_updates).toBe(
      'maintain',
    );
    expect((await f.owner.patch(`/api/apps/${f.app.id}`, { expired_updates: 'always' })).status).toBe(422);
    const offer = (await u.upgrade({})).body.upgrade;
    expect(offer.version).toBe('1.1.0');
    expect((await fetch(offer.artifacts[0].url)).status).toBe(200);
    const after = await activated(f);
    expect((await after.upgrade({})).body.upgrade.version).toBe('1.2.0');
  });

  it('entitlements: a release needing codes is offered only to keys holding them all', async () => {
    const f = await appFixture(t);
    const cat = await f.owner.call('PUT', `/api/apps/${f.app.id}/entitlements`, {
      entitlements: [
        { code: 'pro', name: 'Pro' },
        { code: 'cloud', name: 'Cloud' },
      ],
    });
    expect(cat.status, JSON.stringify(cat.body)).toBe(200);
    await publish(f, { version: '1.1.0' }, [['a.bin', Buffer.from('basic')]]);
    await publish(f, { version: '1.2.0', entitlements: ['pro', 'cloud'] }, [['a.bin', Buffer.from('pro')]]);
    expect((await (await activated(f)).upgrade({})).body.upgrade.version).toBe('1.1.0');
    expect((await (await activated(f, { entitlements: ['pro'] })).upgrade({})).body.upgrade.version).toBe('1.1.0');
    const both = await activated(f, { entitlements: ['cloud', 'pro'] });
    expect((await both.upgrade({})).body.upgrade.version).toBe('1.2.0');
  });
});

describe('API token scopes', () => {
  it('releases:read reads and downloads, releases:write manages; other scopes do neither', async () => {
    const f = await appFixture(t);
    const r = await release(f, { version: '1.0.0' }, [['a.bin', Buffer.from('x')]]);
    const token = async (scopes: string[]) =>
      f.owner.as((await f.owner.post('/api/tokens', { name: scopes.join('+'), scopes, app_ids: null })).body.token);
    const read = await token(['releases:read']);
    const write = await token(['releases:write']);
    const apps = await token(['apps:read', 'apps:write']);
    expect((await read.get(`/api/apps/${f.app.id}/releases`)).status).toBe(200);
    expect((await read.get(`/api/releases/${r.id}/artifacts/a.bin`)).status).toBe(200);
    expect((await read.post(`/api/releases/${r.id}/publish`)).status).toBe(403);
    expect((await apps.get(`/api/apps/${f.app.id}/releases`)).status).toBe(403);
    expect((await apps.post(`/api/apps/${f.app.id}/releases`, { version: '2.0.0' })).status).toBe(403);
    expect((await write.post(`/api/apps/${f.app.id}/releases`, { version: '2.0.0' })).status).toBe(201);
    expect((await write.post(`/api/releases/${r.id}/publish`)).status).toBe(200);
    expect((await write.get(`/api/releases/${r.id}`)).status).toBe(403);
  });
});
