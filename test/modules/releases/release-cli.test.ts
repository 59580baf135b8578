// `keywarden release publish` end to end: the real command line (a child process) against a real
// server with an API token: the release is created, each file uploaded (a multi-MB one streamed from
// disk), published, and offered to a client with the very bytes the files hold.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { runCommand } from '../../helpers/command.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');
let t: TestServer;
let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kw-release-cli-'));
  t = await startTestServer({ TRUSTED_PROXIES: '127.0.0.1', ARTIFACT_DIR: path.join(dir, 'store') });
});
afterAll(async () => {
  await t.close();
  await rm(dir, { recursive: true, force: true });
});

const cli = (args: string[], env: Record<string, string>) =>
  runCommand(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'release', ...args], {
    cwd: ROOT,
    env,
    timeoutMs: 120_000,
  });

describe('keywarden release publish', () => {
  it('creates, uploads (streamed) and publishes with one line; a client is offered the files', async () => {
    const f = await appFixture(t);
    const token = (await f.owner.post('/api/tokens', { name: 'ci', scopes: ['releases:write'], app_ids: [f.app.id] }))
      .body.token as string;
    const big = randomBytes(5 * 1024 * 1024 + 7);
    const linux = path.join(dir, 'app-linux.tar.gz');
    const notes = path.join(dir, 'NOTES.txt');
    await writeFile(linux, big);
    await writeFile(notes, 'read me');
    const env = { KEYWARDEN_URL: t.base, KW_TOKEN: token };
    const r = await cli(
      ['publish', '--app', f.app.id, '--version', '2.3.4', '--channel', 'beta', `${linux}@linux/x64`, notes],
      env,
    );
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('published 2.3.4 on beta');
    const [rel] = (await f.owner.get(`/api/apps/${f.app.id}/releases`)).body;
    expect(rel).toMatchObject({ version: '2.3.4', channel: 'beta', status: 'published' });
    expect(rel.artifacts.map((a: { filename: string; platform: string }) => [a.filename, a.platform])).toEqual([
      ['NOTES.txt', 'any'],
      ['app-linux.tar.gz', 'linux'],
    ]);
    const [key] = await f.keys(1);
    const c = f.client();
    const session = await f.session(c);
    expect((await c.post('/api/client/license', { session, license: key, hwid: hwid(1) })).status).toBe(200);
    const offer = await c.post('/api/client/releases/upgrade', {
      session,
      version: '2.0.0',
      channel: 'beta',
      platform: 'linux',
      arch: 'x64',
    });
    const art = offer.body.upgrade.artifacts.find((a: { filename: string }) => a.filename === 'app-linux.tar.gz');
    const got = Buffer.from(await (await fetch(art.url)).arrayBuffer());
    expect(createHash('sha512').update(got).digest('hex')).toBe(createHash('sha512').update(big).digest('hex'));
    expect(art.sha512).toBe(createHash('sha512').update(big).digest('hex'));

    // Refusals say why and exit non-zero: the version taken, a token without the scope, a missing file.
    const again = await cli(['publish', '--app', f.app.id, '--version', '2.3.4', notes], env);
    expect([again.code, again.out]).toEqual([1, expect.stringContaining('409')]);
    const readOnly = (await f.owner.post('/api/tokens', { name: 'ro', scopes: ['releases:read'], app_ids: null })).body
      .token as string;
    const denied = await cli(['publish', '--app', f.app.id, '--version', '2.3.5', notes], {
      ...env,
      KW_TOKEN: readOnly,
    });
    expect([denied.code, denied.out]).toEqual([1, expect.stringContaining('Token scope does not allow this action')]);
    const missing = await cli(['publish', '--app', f.app.id, '--version', '2.3.6', path.join(dir, 'nope')], env);
    expect(missing.code).toBe(1);
    expect((await f.owner.get(`/api/apps/${f.app.id}/releases`)).body).toHaveLength(1);
    const usage = await cli(['publish', '--app', f.app.id], env);
    expect(usage.code).toBe(2);
  }, 180_000);
});
