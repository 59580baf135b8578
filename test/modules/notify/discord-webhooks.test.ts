// docs/protocol.md 10: "A URL on discord.com/discordapp.com gets a Discord-style embed (screenshot attached)".
// A test cannot reach Discord, so the receiver is local and the server is told, through the test-only
// WEBHOOK_DISCORD_HOSTS, that this receiver's host:port is a Discord host: detection is the same
// host-name match production uses, with one more name in its list. Multipart bodies are parsed by
// undici's FormData parser, not by our own code.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { appFixture } from '../../helpers/fixture.js';
import { hwid } from '../../helpers/client.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';
import { isDiscord } from '../../../src/modules/notify/webhooks.service.js';

const LONDON = '81.2.69.142';
const MOUNTAIN_VIEW = '8.8.8.8';
const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 7)]);

interface Hit {
  path: string;
  contentType: string;
  raw: Buffer;
  signature: string | undefined;
}

let t: TestServer;
let receiver: WebhookReceiver<Hit>;
let hookBase: string;
const nextHit = (match: (h: Hit) => boolean) => receiver.nextHit(match);

/** The Discord message of a hit: JSON, or multipart with `payload_json` and `files[0]`. */
async function message(hit: Hit): Promise<{ payload: any; file: File | null }> {
  if (hit.contentType.startsWith('application/json'))
    return { payload: JSON.parse(hit.raw.toString('utf8')), file: null };
  const form = await new Request('http://receiver.invalid/', {
    method: 'POST',
    headers: { 'content-type': hit.contentType },
    body: new Uint8Array(hit.raw),
  }).formData();
  const file = form.get('files[0]');
  return { payload: JSON.parse(String(form.get('payload_json'))), file: file instanceof File ? file : null };
}

function field(payload: any, name: string): string | undefined {
  return payload.embeds[0].fields.find((f: { name: string }) => f.name === name)?.value;
}

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  hookBase = receiver.url;
  t = await startTestServer({
    TRUSTED_PROXIES: '127.0.0.1',
    ALLOW_PRIVATE_WEBHOOKS: '1',
    WEBHOOK_RETRY_MS: '10,10,10',
    WEBHOOK_DISCORD_HOSTS: receiver.host,
  });
});
afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

describe('Discord detection', () => {
  it('matches discord.com and discordapp.com and their subdomains only, plus the configured hosts', () => {
    for (const u of [
      'https://discord.com/api/webhooks/1/x',
      'https://ptb.discord.com/api/webhooks/1/x',
      'https://discordapp.com/api/webhooks/1/x',
    ]) {
      expect(isDiscord(new URL(u))).toBe(true);
    }
    for (const u of [
      'https://evil-discord.com/x',
      'https://discord.com.example.net/x',
      'https://example.com/discord.com',
    ])
      expect(isDiscord(new URL(u))).toBe(false);
    expect(isDiscord(new URL('http://127.0.0.1:9/x'), ['127.0.0.1:9'])).toBe(true);
    expect(isDiscord(new URL('http://127.0.0.1:10/x'), ['127.0.0.1:9'])).toBe(false);
  });
});

describe('Discord-style webhook embeds', () => {
  it('a registration with a screenshot: multipart with payload_json and files[0], the embed showing it', async () => {
    const f = await appFixture(t, { webhook: `${hookBase}/api/webhooks/1/app` });
    const [key] = await f.keys(1);
    const c = f.client(LONDON);
    const r = await c.post('/api/client/register', {
      session: await f.session(c),
      username: 'disco',
      password: 'pw-disco-1',
      license: key,
      hwid: hwid('disco'),
      screenshot: PNG.toString('base64'),
    });
    expect(r.status).toBe(200);
    const hit = await nextHit((h) => h.path === '/api/webhooks/1/app');
    expect(hit.contentType).toMatch(/^multipart\/form-data; boundary=/);
    const { payload, file } = await message(hit);
    expect(file).not.toBeNull();
    expect(file!.name).toBe('screenshot.png');
    expect(file!.type).toBe('image/png');
    expect(Buffer.from(await file!.arrayBuffer()).equals(PNG)).toBe(true);
    expect(payload).toMatchObject({
      allowed_mentions: { parse: [] },
      attachments: [{ id: 0, filename: 'screenshot.png' }],
    });
    const embed = payload.embeds[0];
    expect(embed).toMatchObject({
      title: 'Registration',
      image: { url: 'attachment://screenshot.png' },
      timestamp: expect.any(String),
    });
    expect(embed.footer.text).toContain('IP Geolocation by DB-IP');
    expect(field(payload, 'Application')).toBe(`\`${f.app.name}\``);
    expect(field(payload, 'User')).toBe('`disco`');
    expect(field(payload, 'HWID')).toBe(`\`${hwid('disco')}\``);
    expect(field(payload, 'IP')).toBe(`\`${LONDON}\``);
    expect(field(payload, 'Location')).toBe('`London, England, GB`');
    expect(field(payload, 'Time')).toMatch(/^<t:\d+:F>$/);
  });

  it('a login from a new country without a screenshot: a JSON alert embed; client text cannot render markdown', async () => {
    const f = await appFixture(t, { webhook: `${hookBase}/api/webhooks/2/app` });
    const [key] = await f.keys(1);
    const name = 'x`[click](https://example.com)';
    const c = f.client(LONDON);
    expect(
      (
        await c.post('/api/client/register', {
          session: await f.session(c),
          username: name,
          password: 'pw-disco-1',
          license: key,
          hwid: hwid('md'),
        })
      ).status,
    ).toBe(200);
    const c2 = f.client(MOUNTAIN_VIEW);
    expect(
      (
        await c2.post('/api/client/login', {
          session: await f.session(c2),
          username: name,
          password: 'pw-disco-1',
          hwid: hwid('md'),
        })
      ).status,
    ).toBe(200);
    const hit = await nextHit((h) => h.path === '/api/webhooks/2/app' && h.raw.includes('Mountain View'));
    expect(hit.contentType).toBe('application/json');
    const { payload } = await message(hit);
    expect(payload.embeds[0]).toMatchObject({ title: 'New location: Login', color: 0xe67e22 });
    expect(payload.embeds[0].image).toBeUndefined();
    expect(payload.attachments).toBeUndefined();
    expect(field(payload, 'User')).toBe('`xˋ[click](https://example.com)`');
    expect(field(payload, 'Location')).toBe('`Mountain View, California, US`');
  });

  it("a reseller's default webhook shows only what the reseller may see: no IP, location or screenshot without view_ip", async () => {
    const f = await appFixture(t);
    const member = await f.owner.post('/api/team', {
      username: 'disco-seller',
      password: 'seller-pass-1',
      allowed_apps: [f.app.id],
      permissions: { generate_keys: true, view_hwid: true },
    });
    expect(member.status).toBe(200);
    expect(
      (await f.owner.patch(`/api/team/${member.body.id}/webhook`, { webhook: `${hookBase}/api/webhooks/3/member` }))
        .status,
    ).toBe(200);
    const seller = await new Api(t.base).signIn('disco-seller', 'seller-pass-1');
    const key = (await seller.post(`/apps/${f.app.id}/licenses`, { amount: 1, duration: 1 })).body[0].key;
    const c = f.client(LONDON);
    const r = await c.post('/api/client/register', {
      session: await f.session(c),
      username: 'disco-r',
      password: 'pw-disco-1',
      license: key,
      hwid: hwid('dr'),
      screenshot: PNG.toString('base64'),
    });
    expect(r.status).toBe(200);
    const hit = await nextHit((h) => h.path === '/api/webhooks/3/member');
    expect(hit.contentType).toBe('application/json');
    const { payload } = await message(hit);
    expect(field(payload, 'User')).toBe('`disco-r`');
    expect(field(payload, 'HWID')).toBe(`\`${hwid('dr')}\``);
    for (const hidden of ['IP', 'Location']) expect(field(payload, hidden)).toBeUndefined();
    expect(payload.embeds[0].image).toBeUndefined();
    expect(hit.raw.toString('utf8')).not.toContain(LONDON);
    expect(hit.raw.toString('utf8')).not.toContain('London');
  });
});
