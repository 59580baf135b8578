// Two-factor sign-in (docs/protocol.md 13.2) against a real server: setup, enable with a code, the ten
// recovery codes, sign-in with a code or a recovery code (each once), the lockout counting wrong
// codes, disable, the owner's policy and its reset of a member's second factor, secrets sealed at
// rest, and no secret or code in any audit field.
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Api } from '../../helpers/http.js';
import { OWNER, createAccount, startTestServer, type TestServer } from '../../helpers/server.js';
import { totp } from '../../helpers/totp.js';

let t: TestServer;
let owner: Api;
const seen: string[] = []; // every secret and code the test handled: none may appear in the audit log

async function sql<T = Record<string, unknown>>(text: string, params: unknown[] = []): Promise<T[]> {
  return t.server.services.sql.all<T>(text, params);
}

async function account(username: string, password: string, role: 'owner' | 'admin' | 'reseller' = 'owner') {
  const ownerRow = (await sql<{ id: string }>('select id from accounts where username = ?', [OWNER.username]))[0]!;
  return createAccount(t, {
    username,
    password,
    role,
    ...(role === 'owner' ? {} : { parentId: ownerRow.id, ownerId: ownerRow.id }),
  });
}

/** Sets up and enables two-factor for a signed-in API; returns the secret and the recovery codes. */
async function enable(api: Api): Promise<{ secret: string; codes: string[] }> {
  const setup = await api.post('/api/auth/2fa/setup');
  expect(setup.status).toBe(200);
  const secret = setup.body.secret as string;
  seen.push(secret);
  const r = await api.post('/api/auth/2fa/enable', { code: totp(secret) });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  seen.push(...r.body.recovery_codes);
  return { secret, codes: r.body.recovery_codes };
}

const login = (body: Record<string, unknown>) => new Api(t.base).post('/api/auth/login', body, { token: '' });

beforeAll(async () => {
  t = await startTestServer();
  owner = await new Api(t.base).signIn(OWNER.username, OWNER.password);
});
afterAll(() => t.close());

describe('two-factor setup and enable', () => {
  it('gives a pending secret and its otpauth URL; a new setup replaces it', async () => {
    await account('tfa-setup', 'setup-pass-1');
    const api = await new Api(t.base).signIn('tfa-setup', 'setup-pass-1');
    const first = await api.post('/api/auth/2fa/setup');
    expect(first.status).toBe(200);
    expect(first.body.secret).toMatch(/^[A-Z2-7]{32}$/);
    expect(first.body.otpauth_url).toBe(
      `otpauth://totp/Keywarden:tfa-setup?secret=${first.body.secret}&issuer=Keywarden`,
    );
    const second = await api.post('/api/auth/2fa/setup');
    seen.push(first.body.secret, second.body.secret);
    expect(second.body.secret).not.toBe(first.body.secret);
    // The replaced secret's code no longer enables; the new one's does.
    const stale = await api.post('/api/auth/2fa/enable', { code: totp(first.body.secret) });
    expect(stale.status).toBe(400);
    expect(stale.body).toEqual({ detail: 'Invalid two-factor code' });
    expect((await api.get('/api/auth/me')).body.account.two_factor).toBe(false);
  });

  it('refuses enable before setup and with a wrong code (400), then enables with ten recovery codes', async () => {
    await account('tfa-enable', 'enable-pass-1');
    const api = await new Api(t.base).signIn('tfa-enable', 'enable-pass-1');
    const other = await new Api(t.base).signIn('tfa-enable', 'enable-pass-1');
    const early = await api.post('/api/auth/2fa/enable', { code: '123456' });
    expect(early.status).toBe(400);
    expect(early.body).toEqual({ detail: 'Set up two-factor sign-in first' });

    const { secret } = (await api.post('/api/auth/2fa/setup')).body;
    seen.push(secret);
    const wrong = await api.post('/api/auth/2fa/enable', { code: totp(secret, 5) });
    expect(wrong.status).toBe(400);
    expect(wrong.body).toEqual({ detail: 'Invalid two-factor code' });

    const r = await api.post('/api/auth/2fa/enable', { code: totp(secret) });
    expect(r.status).toBe(200);
    const codes = r.body.recovery_codes as string[];
    seen.push(...codes);
    expect(codes).toHaveLength(10);
    for (const c of codes) expect(c).toMatch(/^[a-z0-9]{5}-[a-z0-9]{5}$/);
    expect(new Set(codes).size).toBe(10);

    expect((await api.get('/api/auth/me')).body.account.two_factor).toBe(true);
    expect((await other.get('/api/auth/me')).status).toBe(401); // the other session ended
    expect((await api.post('/api/auth/2fa/setup')).body).toEqual({ detail: 'Two-factor sign-in is already enabled' });
  });

  it('keeps the secret sealed at rest, under the key in DATA_DIR/secrets', async () => {
    const rows = await sql<{ two_factor_secret: string }>(
      "select two_factor_secret from accounts where username = 'tfa-enable'",
    );
    const stored = rows[0]!.two_factor_secret;
    expect(stored).toBeTruthy();
    for (const s of seen) expect(stored).not.toContain(s);
    expect(Buffer.from(stored, 'base64').byteLength).toBe(24 + 16 + 32); // nonce, MAC, base32 secret
    expect(fs.statSync(path.join(t.dataDir, 'secrets', 'two-factor.key')).mode & 0o777).toBe(0o600);
    const codes = await sql<{ code_hash: string }>(
      "select code_hash from two_factor_recovery_codes c join accounts a on a.id = c.account_id where a.username = 'tfa-enable'",
    );
    expect(codes).toHaveLength(10);
    for (const c of codes) for (const s of seen) expect(c.code_hash).not.toContain(s.replace('-', ''));
  });
});

describe('sign-in with two-factor on', () => {
  let secret: string;
  let codes: string[];

  beforeAll(async () => {
    await account('tfa-login', 'login-pass-1');
    ({ secret, codes } = await enable(await new Api(t.base).signIn('tfa-login', 'login-pass-1')));
  });

  it('asks for the code after a right password, without counting a failure', async () => {
    for (let i = 0; i < 7; i++) {
      const r = await login({ username: 'tfa-login', password: 'login-pass-1' });
      expect(r.status).toBe(401);
      expect(r.body).toEqual({ detail: 'Two-factor code required' });
    }
    const wrongPassword = await login({ username: 'tfa-login', password: 'nope-pass-1', otp: totp(secret) });
    expect(wrongPassword.status).toBe(401);
    expect(wrongPassword.body).toEqual({ detail: 'Invalid username or password' });
    // The enable spent the current step: the next step's code signs in, once.
    const code = totp(secret, 1);
    const ok = await login({ username: 'tfa-login', password: 'login-pass-1', otp: code });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.account.two_factor).toBe(true);
    const replay = await login({ username: 'tfa-login', password: 'login-pass-1', otp: code });
    expect(replay.status).toBe(401);
    expect(replay.body).toEqual({ detail: 'Invalid two-factor code' });
    // An earlier step than one already accepted is refused too.
    const earlier = await login({ username: 'tfa-login', password: 'login-pass-1', otp: totp(secret) });
    expect(earlier.body).toEqual({ detail: 'Invalid two-factor code' });
  });

  it('takes a recovery code (any case, with or without its hyphen) once', async () => {
    const r = await login({ username: 'tfa-login', password: 'login-pass-1', otp: codes[0]!.toUpperCase() });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const again = await login({ username: 'tfa-login', password: 'login-pass-1', otp: codes[0] });
    expect(again.body).toEqual({ detail: 'Invalid two-factor code' });
    const bare = await login({ username: 'tfa-login', password: 'login-pass-1', otp: codes[1]!.replace('-', '') });
    expect(bare.status).toBe(200);
    const state = await new Api(t.base, r.body.token).get('/api/account/security');
    expect(state.body.recovery_codes_left).toBe(8);
  });

  it('counts wrong codes towards the lockout: the account locks after 5 failures', async () => {
    await account('tfa-brute', 'brute-pass-1');
    const { secret: s } = await enable(await new Api(t.base).signIn('tfa-brute', 'brute-pass-1'));
    for (let i = 0; i < 5; i++) {
      const r = await login({ username: 'tfa-brute', password: 'brute-pass-1', otp: String(100000 + i) });
      expect(r.body).toEqual({ detail: 'Invalid two-factor code' });
    }
    const locked = await login({ username: 'tfa-brute', password: 'brute-pass-1', otp: totp(s, 1) });
    expect(locked.status).toBe(429);
    expect(locked.body).toEqual({ detail: 'Too many failed attempts, try again later.' });
  });

  it('audits sign-ins and failures with their actor and browser, never a code', async () => {
    const r = await new Api(t.base).post(
      '/api/auth/login',
      { username: 'tfa-login', password: 'login-pass-1', otp: codes[2] },
      {
        token: '',
        headers: { 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0' },
      },
    );
    expect(r.status).toBe(200);
    const mine = await new Api(t.base, r.body.token).get('/api/account/sign-ins');
    expect(mine.status).toBe(200);
    expect(mine.body[0]).toMatchObject({ success: true, ip: '127.0.0.1', browser: 'Firefox 128 on Linux' });
    expect(mine.body.some((s: { success: boolean }) => !s.success)).toBe(true);
    // tfa-login is an owner of its own: its audit is its tree's (the first owner sees none of it).
    expect((await owner.get('/api/audit?action=auth.login_failed')).body).toEqual([]);
    const audit = await new Api(t.base, r.body.token).get('/api/audit?action=auth.login_failed');
    expect(audit.status).toBe(200);
    const entry = audit.body.find((e: { actor: { username: string } }) => e.actor.username === 'tfa-login');
    expect(entry).toMatchObject({ level: 'warning', detail: 'Wrong two-factor code' });
  });
});

describe('disable', () => {
  it('needs the password and a code; wrong answers are 400 and count towards the lockout', async () => {
    await account('tfa-off', 'off-pass-1');
    const api = await new Api(t.base).signIn('tfa-off', 'off-pass-1');
    const { secret, codes } = await enable(api);
    const other = (await login({ username: 'tfa-off', password: 'off-pass-1', otp: totp(secret, 1) })).body.token;
    const badPassword = await api.post('/api/auth/2fa/disable', { password: 'wrong-pass-1', code: codes[0] });
    expect(badPassword.status).toBe(400);
    expect(badPassword.body).toEqual({ detail: 'Current password is incorrect' });
    const badCode = await api.post('/api/auth/2fa/disable', { password: 'off-pass-1', code: '000000' });
    expect(badCode.status).toBe(400);
    expect(badCode.body).toEqual({ detail: 'Invalid two-factor code' });
    const ok = await api.post('/api/auth/2fa/disable', { password: 'off-pass-1', code: codes[0] });
    expect(ok.status).toBe(200);
    expect((await api.get('/api/auth/me')).body.account.two_factor).toBe(false);
    expect((await new Api(t.base, other).get('/api/auth/me')).status).toBe(401);
    expect((await login({ username: 'tfa-off', password: 'off-pass-1' })).status).toBe(200);
    const again = await api.post('/api/auth/2fa/disable', { password: 'off-pass-1', code: codes[1] });
    expect(again.body).toEqual({ detail: 'Two-factor sign-in is not enabled' });
    // Two wrong answers above and three more make five: the name is locked.
    await account('tfa-off2', 'off2-pass-1');
    const api2 = await new Api(t.base).signIn('tfa-off2', 'off2-pass-1');
    await enable(api2);
    for (let i = 0; i < 5; i++) await api2.post('/api/auth/2fa/disable', { password: 'off2-pass-1', code: '111111' });
    const locked = await api2.post('/api/auth/2fa/disable', { password: 'off2-pass-1', code: '111111' });
    expect(locked.status).toBe(429);
  });
});

describe("the owner's policy and reset", () => {
  it('sends a member without two-factor to Account, then lets it work once it has one; the owner resets it', async () => {
    const member = (await owner.post('/api/team', { username: 'tfa-member', password: 'member-pass-1' })).body;
    const admin = await owner.post('/api/team', { username: 'tfa-admin', password: 'admin-pass-1', role: 'admin' });
    const m = await new Api(t.base).signIn('tfa-member', 'member-pass-1');
    const a = await new Api(t.base).signIn('tfa-admin', 'admin-pass-1');
    expect((await a.patch('/api/account/security', { require_two_factor: true })).status).toBe(403);
    const set = await owner.patch('/api/account/security', { require_two_factor: true });
    expect(set.body).toEqual({ require_two_factor: true });
    expect((await owner.get('/api/auth/me')).body.account.require_two_factor).toBe(true);

    const refused = await m.get('/api/apps');
    expect(refused.status).toBe(403);
    expect(refused.body).toEqual({ detail: 'Two-factor authentication required. Set it up from Account.' });
    expect((await m.get('/api/auth/me')).body.account.two_factor_required).toBe(true);
    expect((await owner.get('/api/apps')).status).toBe(200); // not the owner itself

    await enable(m);
    expect((await m.get('/api/apps')).status).toBe(200);
    expect((await m.get('/api/auth/me')).body.account.two_factor_required).toBe(false);
    const team = (await owner.get('/api/team')).body as { id: string; two_factor: boolean }[];
    expect(team.find((x) => x.id === member.id)?.two_factor).toBe(true);
    expect(team.find((x) => x.id === admin.body.id)?.two_factor).toBe(false);

    expect((await a.delete(`/api/team/${member.id}/2fa`)).status).toBe(403); // the owner's, not an admin's
    const reset = await owner.delete(`/api/team/${member.id}/2fa`);
    expect(reset.status).toBe(200);
    expect((await m.get('/api/auth/me')).status).toBe(401); // its sessions ended
    const back = await new Api(t.base).signIn('tfa-member', 'member-pass-1'); // no code asked
    expect((await back.get('/api/apps')).status).toBe(403);
    await owner.patch('/api/account/security', { require_two_factor: false });
    expect((await back.get('/api/apps')).status).toBe(200);
    const log = (await owner.get('/api/audit?action=team.2fa_reset')).body;
    expect(log[0]).toMatchObject({
      actor: { username: 'owner', role: 'owner' },
      detail: 'tfa-member two-factor sign-in reset',
    });
  });
});

describe('nothing secret is written down', () => {
  it('no audit field carries a secret or a code', async () => {
    const rows = await sql<Record<string, unknown>>('select * from audit_log');
    const text = JSON.stringify(rows);
    for (const s of seen) {
      expect(text).not.toContain(s);
      expect(text.toLowerCase()).not.toContain(s.replace('-', '').toLowerCase());
    }
    const actions = new Set(rows.map((r) => r.action));
    for (const a of ['auth.login', 'auth.login_failed', 'auth.2fa.enabled', 'auth.2fa.disabled'])
      expect(actions).toContain(a);
  });
});
