// The update address sent to outdated clients in the 426 must be an http(s) URL: anything else is a
// clear 422 on `update_url`; an empty value clears it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.close());

describe('update_url', () => {
  it('takes http(s) addresses only', async () => {
    const f = await appFixture(t);
    for (const bad of ['not a url', 'ftp://example.com/x', 'javascript:alert(1)', '/relative', ' https://x.test']) {
      const r = await f.owner.patch(`/api/apps/${f.app.id}`, { update_url: bad });
      expect(r.status, bad).toBe(422);
      expect(r.body.detail[0]).toMatchObject({ loc: ['body', 'update_url'] });
      expect(r.body.detail[0].msg).toContain('http or https address');
    }
    const ok = await f.owner.patch(`/api/apps/${f.app.id}`, { update_url: 'https://example.com/download' });
    expect(ok.body.update_url).toBe('https://example.com/download');
    expect((await f.owner.patch(`/api/apps/${f.app.id}`, { update_url: '' })).body.update_url).toBe('');
  });
});
