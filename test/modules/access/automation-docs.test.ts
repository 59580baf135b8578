// docs/automation.md's examples, run as written: every ```sh block, in order, in one bash (as a
// reader pasting them into one terminal) against a real server, with curl and jq. They sign in, make
// a scoped token, generate a key from a "shop", ban it, export the users to CSV and revoke the
// token; what each did is then checked through the API. (```bash blocks, like the endless event
// stream, are illustrations and are not run.)
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, startTestServer, type TestServer } from '../../helpers/server.js';
import { requireToolchain } from '../../helpers/toolchain.js';

const DOC = path.resolve(import.meta.dirname, '../../../docs/automation.md');
const tools = requireToolchain(
  'bash, curl and jq (Debian packages curl, jq)',
  ['bash', 'curl', 'jq'].every((t) => spawnSync(t, ['--version']).status === 0),
);

describe.skipIf(!tools)('docs/automation.md', () => {
  let t: TestServer;
  let owner: Api;
  let appId: string;

  beforeAll(async () => {
    t = await startTestServer();
    owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
    appId = (await owner.post('/api/apps', { name: 'Shop product' })).body.id;
    const [k] = (await owner.post(`/api/apps/${appId}/licenses`, { amount: 1, duration: 5 })).body;
    const session = (
      await owner.post(
        '/api/client/init',
        { api_key: (await owner.get(`/api/apps/${appId}`)).body.api_key, version: '1.0' },
        { token: '' },
      )
    ).body.session;
    const reg = await owner.post(
      '/api/client/register',
      { session, username: 'doc-user', password: 'doc-pass-123', license: k.key, hwid: 'doc-hwid-1' },
      { token: '' },
    );
    expect(reg.status).toBe(200);
  });
  afterAll(() => t?.close());

  it('runs every sh example as written', async () => {
    const blocks = [...fs.readFileSync(DOC, 'utf8').matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
    expect(blocks.length).toBeGreaterThanOrEqual(5);
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-automation-'));
    try {
      const script = ['set -euo pipefail', ...blocks, 'echo "TOKEN=$KW_TOKEN"'].join('\n');
      // Asynchronously: the server answering these calls runs in this very process.
      const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = execFile(
          'bash',
          ['--norc', '--noprofile', '-c', script],
          {
            cwd,
            timeout: 60_000,
            env: {
              PATH: process.env.PATH,
              KEYWARDEN_URL: t.base,
              KW_USER: OWNER.username,
              KW_PASSWORD: OWNER.password,
              APP_ID: appId,
            },
          },
          (_err, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }),
        );
      });
      expect(run.stderr).toBe('');
      expect(run.code).toBe(0);
      const key = /^your license key: (\S+)$/m.exec(run.stdout)?.[1];
      expect(key, run.stdout).toBeTruthy();
      expect(run.stdout).toMatch(/^banned$/m);
      const token = /^TOKEN=(kwt_\S+)$/m.exec(run.stdout)?.[1];
      expect(token, run.stdout).toBeTruthy();
      const csv = fs.readFileSync(path.join(cwd, 'users.csv'), 'utf8').trim().split('\n');
      expect(csv[0]).toBe('"username","created_at","last_login","expires_at","level","banned"');
      expect(csv[1]).toMatch(/^"doc-user",/);
      const made = (await owner.get(`/api/apps/${appId}/licenses?q=order%201001`)).body.items;
      expect(made).toHaveLength(1);
      expect(made[0]).toMatchObject({ status: 'banned', note: 'order 1001' });
      const log = (await owner.get(`/api/apps/${appId}/logs?action=license.ban`)).body;
      expect(log[0].actor).toMatchObject({ username: OWNER.username, token_id: expect.any(String) });
      expect((await new Api(t.base, token).get('/api/apps')).body).toEqual({ detail: 'Invalid or expired token' });
    } finally {
      fs.rmSync(cwd, { recursive: true, force: true });
    }
  });
});
