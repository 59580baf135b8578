import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('configuration (PROTOCOL 8)', () => {
  it('serves on 0.0.0.0:8080 with ./data and embedded services when nothing is set', () => {
    const c = loadConfig({}, '/srv/kw');
    expect(c).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      dataDir: path.resolve('/srv/kw/data'),
      workers: 1,
      logLevel: 'info',
      allowPrivateWebhooks: false,
    });
    expect(c.databaseUrl).toBeUndefined();
    expect(c.redisUrl).toBeUndefined();
  });

  it('parses lists and flags', () => {
    const c = loadConfig({
      DEVELOPER_EMAILS: ' Dev@X.io, ops@x.io ,',
      TRUSTED_PROXIES: '10.0.0.0/8,::1',
      ALLOW_PRIVATE_WEBHOOKS: '1',
    });
    expect(c.developerEmails).toEqual(['dev@x.io', 'ops@x.io']);
    expect(c.trustedProxies).toEqual(['10.0.0.0/8', '::1']);
    expect(c.allowPrivateWebhooks).toBe(true);
  });

  it('refuses more than one worker without Redis, and bad numbers', () => {
    expect(() => loadConfig({ WORKERS: '3' })).toThrow(ConfigError);
    expect(() => loadConfig({ PORT: 'eighty' })).toThrow(/PORT/);
    expect(() => loadConfig({ PORT: '70000' })).toThrow(/PORT/);
    expect(loadConfig({ WORKERS: '3', REDIS_URL: 'redis://127.0.0.1:6379' }).workers).toBe(3);
  });
});
