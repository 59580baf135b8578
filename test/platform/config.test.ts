import { describe, expect, it } from 'vitest';
import path from 'node:path';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('configuration (docs/protocol.md 8)', () => {
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

  it('takes an affinity route and port, and refuses a route a header could not carry or ports past 65535', () => {
    const c = loadConfig({ AFFINITY_ROUTE: 'host_a.1', AFFINITY_PORT: '8100' });
    expect([c.affinityRoute, c.affinityPort]).toEqual(['host_a.1', 8100]);
    expect(loadConfig({ AFFINITY_PORT: '8100' }).affinityPort).toBe(0); // no route: no own port
    expect(() => loadConfig({ AFFINITY_ROUTE: 'a b' })).toThrow(/AFFINITY_ROUTE/);
    expect(() => loadConfig({ AFFINITY_ROUTE: 'x'.repeat(33) })).toThrow(/AFFINITY_ROUTE/);
    expect(() =>
      loadConfig({ AFFINITY_ROUTE: 'a', AFFINITY_PORT: '65535', WORKERS: '2', REDIS_URL: 'redis://127.0.0.1:6379' }),
    ).toThrow(/AFFINITY_PORT/);
  });
});
