// compose.yaml checked without Docker: parsed (merge keys resolved, ${...} filled from
// deploy/compose/env.example), every variable it gives Keywarden is one src/config.ts reads and the
// whole environment loads, every file it references exists (keys.env is made by make-keys.sh and kept
// out of git), the keys make-keys.sh prints are what `keywarden secrets import` takes, and start order,
// healthchecks, Caddy's upstreams and the shutdown budget agree with each other.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { SHARED_KEY_SETTINGS, importSecrets } from '../../src/platform/crypto/secrets.js';

const root = path.resolve(import.meta.dirname, '../..');
const read = (f: string) => fs.readFileSync(path.join(root, f), 'utf8');

/** KEY=value lines (env files). */
function envLines(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\s*([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line);
    if (m) out[m[1]!] = m[2]!;
  }
  return out;
}

const dotenv = envLines(read('deploy/compose/env.example'));

/** Compose's interpolation, as far as compose.yaml uses it: ${X}, ${X:-default}, ${X:?message}. */
function interpolate(text: string, vars: Record<string, string>): string {
  return text.replace(/\$\{([A-Z_][A-Z0-9_]*)(?::([-?])([^}]*))?\}/g, (_, name: string, op?: string, arg?: string) => {
    const v = vars[name];
    if (v !== undefined && v !== '') return v;
    if (op === '-') return arg ?? '';
    throw new Error(`compose.yaml needs ${name}${op === '?' ? ` (${arg})` : ''}: it is not in env.example`);
  });
}

interface Service {
  image?: string;
  build?: string | { context: string };
  hostname?: string;
  environment?: Record<string, string>;
  env_file?: { path: string; required?: boolean }[];
  volumes?: string[];
  healthcheck?: { test: string[] };
  depends_on?: Record<string, { condition: string }>;
  stop_grace_period?: string;
  networks?: string[] | Record<string, { ipv4_address?: string }>;
}
const compose = parse(interpolate(read('compose.yaml'), dotenv), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
  networks: Record<string, { ipam?: { config: { subnet: string }[] } }>;
};
const services = compose.services;
const replicas = Object.keys(services).filter((s) => services[s]!.build !== undefined);

/** Every environment variable src/config.ts reads. */
const known = (() => {
  const src = read('src/config.ts');
  const names = new Set<string>();
  for (const m of src.matchAll(/\b(?:int|opt)\(env, '([A-Z_][A-Z0-9_]*)'/g)) names.add(m[1]!);
  for (const m of src.matchAll(/\benv\.([A-Z_][A-Z0-9_]*)/g)) names.add(m[1]!);
  return names;
})();

function makeKeys(): Record<string, string> {
  return envLines(execFileSync(path.join(root, 'deploy/compose/make-keys.sh'), { encoding: 'utf8' }));
}

const seconds = (d: string) => {
  const m = /^(\d+)(ms|s|m)$/.exec(d);
  if (!m) throw new Error(`duration ${d}`);
  return Number(m[1]) * { ms: 0.001, s: 1, m: 60 }[m[2] as 'ms' | 's' | 'm'];
};

describe('compose.yaml', () => {
  it('runs two replicas of the image, each with WORKERS=2 and Redis, and PostgreSQL, Redis and Caddy', () => {
    expect(Object.keys(services).sort()).toEqual(['caddy', 'keywarden-a', 'keywarden-b', 'postgres', 'redis']);
    expect(replicas).toEqual(['keywarden-a', 'keywarden-b']);
    for (const r of replicas) {
      const env = services[r]!.environment!;
      expect(env.WORKERS).toBe('2');
      expect(env.REDIS_URL).toBe('redis://redis:6379');
      expect(env.DATABASE_URL).toMatch(/^postgresql:\/\/keywarden:[^@]+@postgres:5432\/keywarden$/);
      // each replica tells its peers its own name, which is its hostname on the network
      expect(env.CLUSTER_ADVERTISE_HOST).toBe(services[r]!.hostname);
      expect(services[r]!.image).toBe(services[replicas[0]!]!.image);
      // their own DATA_DIR each (docs/multi-host.md): not one shared volume
      expect(services[r]!.volumes).toEqual([`${r}:/data`]);
      expect(compose.volumes).toHaveProperty(r);
    }
    const pg = services.postgres!.environment!;
    const url = new URL(services['keywarden-a']!.environment!.DATABASE_URL!);
    expect([url.username, decodeURIComponent(url.password), url.pathname.slice(1)]).toEqual([
      pg.POSTGRES_USER,
      pg.POSTGRES_PASSWORD,
      pg.POSTGRES_DB,
    ]);
    expect(services.redis!.image).toBeDefined();
    expect((services.redis as { command: string[] }).command.join(' ')).toContain('--appendonly yes');
  });

  it('gives Keywarden only variables src/config.ts knows, and the whole environment loads', async () => {
    const keys = makeKeys();
    expect(Object.keys(keys).sort()).toEqual([...SHARED_KEY_SETTINGS].sort());
    for (const r of replicas) {
      const env = { ...keys, ...services[r]!.environment! };
      const unknown = Object.keys(env).filter((k) => !known.has(k));
      expect(unknown, `${r}: variables src/config.ts does not read`).toEqual([]);
      const config = loadConfig(env, '/app');
      expect(config.workers).toBe(2);
      expect(config.trustedProxies).toEqual([
        (services.caddy!.networks as Record<string, { ipv4_address: string }>).backend!.ipv4_address,
      ]);
      expect(config.publicUrl).toBe(`https://${dotenv.KEYWARDEN_DOMAIN}`);
      // a drained replica finishes within the grace period Compose gives it before SIGKILL
      expect(seconds(services[r]!.stop_grace_period!) * 1000).toBeGreaterThan(config.shutdownTimeoutMs + 20_000);
    }
    // the keys make-keys.sh prints are what `keywarden secrets import` stores
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-compose-keys-'));
    try {
      const stored = await importSecrets(loadConfig({ DATA_DIR: dataDir }), keys, false);
      expect(stored).toHaveLength(3);
    } finally {
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
    // Caddy's address is the only trusted proxy, and it is on the network's subnet
    const subnet = compose.networks.backend!.ipam!.config[0]!.subnet;
    expect(subnet).toBe('172.28.0.0/24');
    expect((services.caddy!.networks as Record<string, { ipv4_address: string }>).backend!.ipv4_address).toMatch(
      /^172\.28\.0\.\d+$/,
    );
  });

  it('references only files that exist; keys.env is made by make-keys.sh and kept out of git', () => {
    for (const [name, s] of Object.entries(services)) {
      if (s.build !== undefined) {
        const ctx = typeof s.build === 'string' ? s.build : s.build.context;
        expect(fs.existsSync(path.join(root, ctx, 'Dockerfile')), `${name}: Dockerfile`).toBe(true);
      }
      for (const v of s.volumes ?? []) {
        const src = v.split(':')[0]!;
        if (src.startsWith('.') || src.startsWith('/'))
          expect(fs.existsSync(path.join(root, src)), `${name}: ${src}`).toBe(true);
        else expect(compose.volumes, `${name}: volume ${src} is declared`).toHaveProperty(src);
      }
      for (const f of s.env_file ?? []) {
        expect(f.path).toBe('deploy/compose/keys.env');
        expect(f.required).toBe(true);
        const ignored = spawnSync('git', ['check-ignore', '-q', f.path], { cwd: root });
        expect(ignored.status, `${f.path} must be ignored by git (it holds the keys)`).toBe(0);
      }
    }
    // the Caddyfile's upstreams are the replicas on Keywarden's port, checked on a route that exists
    const caddyfile = read('deploy/compose/Caddyfile');
    const upstreams = /reverse_proxy ([^{]+)\{/.exec(caddyfile)![1]!.trim().split(/\s+/);
    expect(upstreams).toEqual(replicas.map((r) => `${r}:${services[r]!.environment!.PORT}`));
    const healthUri = /health_uri (\S+)/.exec(caddyfile)![1]!;
    expect(healthUri).toBe('/readyz');
    expect(read('src/modules/system/system.routes.ts')).toContain(`path: '${healthUri}'`);
    expect(caddyfile).toContain('{$KEYWARDEN_DOMAIN}');
    expect(services.caddy!.environment).toHaveProperty('KEYWARDEN_DOMAIN');
  });

  it('starts in order of health: the databases, then both replicas, then Caddy', () => {
    for (const [name, s] of Object.entries(services)) {
      for (const [dep, { condition }] of Object.entries(s.depends_on ?? {})) {
        expect(services, `${name} depends on ${dep}`).toHaveProperty(dep);
        expect(condition, `${name} -> ${dep}`).toBe('service_healthy');
        expect(services[dep]!.healthcheck?.test.length, `${dep} has a healthcheck`).toBeGreaterThan(0);
      }
    }
    const deps = (s: string) => Object.keys(services[s]!.depends_on ?? {}).sort();
    for (const r of replicas) expect(deps(r)).toEqual(['postgres', 'redis']);
    expect(deps('caddy')).toEqual([...replicas].sort());
    // the replicas' check asks the port they listen on, on the liveness route
    for (const r of replicas) {
      const test = services[r]!.healthcheck!.test.join(' ');
      expect(test).toContain(`127.0.0.1:${services[r]!.environment!.PORT}/healthz`);
    }
    expect(read('src/modules/system/system.routes.ts')).toContain("path: '/healthz'");
    expect(services.postgres!.healthcheck!.test).toContain('pg_isready');
    expect(services.redis!.healthcheck!.test.join(' ')).toContain('redis-cli ping');
  });
});
