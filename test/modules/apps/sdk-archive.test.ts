// GET /apps/{id}/sdk/{lang}: the language's library source, example and README plus a
// keywarden.json preconfigured for the app, as a deterministic zip.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { strFromU8, unzipSync } from 'fflate';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t?.close());

async function download(
  base: string,
  token: string,
  appId: string,
  lang: string,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${base}/api/apps/${appId}/sdk/${lang}`, {
    headers: { authorization: `Bearer ${token}`, ...headers },
  });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-disposition')).toBe(`attachment; filename="svc_sdk_${lang}.zip"`);
  const raw = new Uint8Array(await res.arrayBuffer());
  return { raw, files: unzipSync(raw) };
}

describe('SDK archive', () => {
  it('carries the TypeScript library source, example and README, without build outputs or repo-only tests', async () => {
    const f = await appFixture(t);
    const { files } = await download(t.base, f.owner.token!, f.app.id, 'typescript');
    const names = Object.keys(files);
    for (const n of [
      'src/index.ts',
      'src/client.ts',
      'src/heartbeat.ts',
      'examples/activate.mjs',
      'package.json',
      'README.md',
      'keywarden.json',
      'scripts/build.mjs',
      'tsconfig.esm.json',
    ]) {
      expect(names, n).toContain(`svc_sdk_typescript/${n}`);
    }
    expect(names.filter((n) => /\/(dist|node_modules|test)\//.test(n) || n.endsWith('.tgz'))).toEqual([]);
    const readme = strFromU8(files['svc_sdk_typescript/README.md']!);
    expect(readme).toMatch(/^# @keywarden\/client/);
    expect(readme).toContain(`## This download: ${f.app.name} (typescript)`);
    expect(readme).toContain('No `api_secret`');
  });

  it('carries the Java library source, example, build.sh, pom.xml and a filled keywarden.json, deterministically', async () => {
    const keys = ((await (await fetch(`${t.base}/api/client/keys`)).json()) as { keys: unknown[] }).keys;
    const f = await appFixture(t, { require_signature: true });
    const { raw, files } = await download(t.base, f.owner.token!, f.app.id, 'java');
    const names = Object.keys(files);
    for (const n of [
      'src/main/java/io/keywarden/Client.java',
      'src/main/java/io/keywarden/Heartbeat.java',
      'src/main/java/io/keywarden/Channel.java',
      'src/test/java/io/keywarden/UnitTests.java',
      'examples/Activate.java',
      'build.sh',
      'pom.xml',
      'README.md',
      'keywarden.json',
    ])
      expect(names, n).toContain(`svc_sdk_java/${n}`);
    expect(names.filter((n) => /\/(build|target)\//.test(n) || /\.(class|jar)$/.test(n))).toEqual([]);
    expect(JSON.parse(strFromU8(files['svc_sdk_java/keywarden.json']!))).toEqual({
      format: 1,
      base_url: t.base,
      app_name: f.app.name,
      api_key: f.app.api_key,
      version: f.app.version,
      response_keys: keys,
      app_id: f.app.id,
      api_secret: f.app.api_secret,
    });
    const readme = strFromU8(files['svc_sdk_java/README.md']!);
    expect(readme).toMatch(/^# Keywarden SDK for Java/);
    expect(readme).toContain(`## This download: ${f.app.name} (java)`);
    const again = await download(t.base, f.owner.token!, f.app.id, 'java');
    expect(Buffer.from(again.raw).equals(Buffer.from(raw))).toBe(true);
  });

  it('carries the Go module: go.mod, the package, its tests and example, without build outputs', async () => {
    const f = await appFixture(t);
    const { files } = await download(t.base, f.owner.token!, f.app.id, 'go');
    const names = Object.keys(files);
    for (const n of [
      'go.mod',
      'client.go',
      'heartbeat.go',
      'channel.go',
      'x25519.go',
      'offline.go',
      'vectors_test.go',
      'examples/activate/main.go',
      'README.md',
      'keywarden.json',
    ]) {
      expect(names, n).toContain(`svc_sdk_go/${n}`);
    }
    expect(strFromU8(files['svc_sdk_go/go.mod']!)).toMatch(/^module keywarden\n/);
    expect(JSON.parse(strFromU8(files['svc_sdk_go/keywarden.json']!))).toMatchObject({
      format: 1,
      api_key: f.app.api_key,
      app_id: f.app.id,
    });
    const readme = strFromU8(files['svc_sdk_go/README.md']!);
    expect(readme).toMatch(/^# Keywarden Go SDK/);
    expect(readme).toContain(`## This download: ${f.app.name} (go)`);
  });

  it('writes keywarden.json format 1 with base_url from Host, pinned keys, and api_secret only under require_signature', async () => {
    const keys = ((await (await fetch(`${t.base}/api/client/keys`)).json()) as { keys: unknown[] }).keys;
    const plain = await appFixture(t);
    const cfg = JSON.parse(
      strFromU8(
        (await download(t.base, plain.owner.token!, plain.app.id, 'python')).files['svc_sdk_python/keywarden.json']!,
      ),
    );
    expect(cfg).toEqual({
      format: 1,
      base_url: t.base,
      app_name: plain.app.name,
      api_key: plain.app.api_key,
      version: plain.app.version,
      response_keys: keys,
      app_id: plain.app.id,
    });
    const signed = await appFixture(t, { require_signature: true });
    const { files } = await download(t.base, signed.owner.token!, signed.app.id, 'cpp');
    expect(JSON.parse(strFromU8(files['svc_sdk_cpp/keywarden.json']!)).api_secret).toBe(signed.app.api_secret);
    expect(strFromU8(files['svc_sdk_cpp/README.md']!)).toMatch(/require_signature\*\* on[\s\S]*can be extracted/);
  });

  it('is byte-identical across downloads, for every language', async () => {
    const f = await appFixture(t);
    for (const lang of ['python', 'csharp', 'cpp', 'typescript', 'go']) {
      const a = await download(t.base, f.owner.token!, f.app.id, lang);
      const b = await download(t.base, f.owner.token!, f.app.id, lang);
      expect(Buffer.from(a.raw).equals(Buffer.from(b.raw)), lang).toBe(true);
      expect(Object.keys(a.files)).toContain(`svc_sdk_${lang}/keywarden.json`);
      expect(Object.keys(a.files)).toContain(`svc_sdk_${lang}/README.md`);
    }
    expect((await f.owner.get(`/api/apps/${f.app.id}/sdk/rust`)).status).toBe(422);
  });

  it('does not let a forged Host header write into the config', async () => {
    const f = await appFixture(t);
    // fetch() sets Host itself; node:http sends the header as given.
    const get = (host: string) =>
      new Promise<Record<string, Uint8Array>>((resolve, reject) => {
        const u = new URL(`${t.base}/api/apps/${f.app.id}/sdk/python`);
        http
          .get(
            {
              host: u.hostname,
              port: u.port,
              path: u.pathname,
              headers: { host, authorization: `Bearer ${f.owner.token}` },
            },
            (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('end', () =>
                res.statusCode === 200
                  ? resolve(unzipSync(new Uint8Array(Buffer.concat(chunks))))
                  : reject(new Error(String(res.statusCode))),
              );
            },
          )
          .on('error', reject);
      });
    const baseOf = async (host: string) =>
      JSON.parse(strFromU8((await get(host))['svc_sdk_python/keywarden.json']!)).base_url;
    expect(await baseOf('licensing.internal:8443')).toBe('http://licensing.internal:8443');
    expect(await baseOf('evil.example/"x')).toBe('http://localhost:8080');
  });

  it('uses PUBLIC_URL when configured', async () => {
    const p = await startTestServer({ PUBLIC_URL: 'https://licensing.example.com/' });
    try {
      const f = await appFixture(p);
      const { files } = await download(p.base, f.owner.token!, f.app.id, 'csharp');
      expect(JSON.parse(strFromU8(files['svc_sdk_csharp/keywarden.json']!)).base_url).toBe(
        'https://licensing.example.com',
      );
    } finally {
      await p.close();
    }
  });
});
