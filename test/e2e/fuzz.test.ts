// A seeded fuzz run generated from /api/openapi.json against a real server process:
// zero 5xx, zero answers slower than 2 s, every /api/client/ response signed, RSS flat. Then its
// hostile phase (test/fuzz/hostile.ts): parallel bursts, lying Content-Lengths on raw sockets and
// credentials revoked in flight, with zero 5xx and zero crashes as the pass condition.
// The long mode is `npm run fuzz -- --requests 100000` (scripts/fuzz.ts).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import fc from 'fast-check';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OWNER, createTestDatabase } from '../helpers/server.js';
import { spawnServer, type ServerProcess, type StartingServer } from '../helpers/process.js';
import { fuzz } from '../fuzz/openapi-fuzzer.js';
import { prepareTarget, rssOf } from '../fuzz/target.js';
import { hostile } from '../fuzz/hostile.js';

const REQUESTS = Number(process.env.FUZZ_REQUESTS ?? 3000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261122);

describe('fuzzing every route from the OpenAPI document', () => {
  let server: ServerProcess;
  let starting: StartingServer | undefined;
  let drop: () => Promise<void>;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-fuzz-'));

  beforeAll(async () => {
    const db = await createTestDatabase();
    drop = db.drop;
    starting = spawnServer({
      DATABASE_URL: db.url,
      DATA_DIR: dataDir,
      OWNER_USERNAME: OWNER.username,
      OWNER_PASSWORD: OWNER.password,
      TRUSTED_PROXIES: '127.0.0.1',
    });
    server = await starting;
  }, 60_000);
  afterAll(async () => {
    // The child exists from spawnServer's call on: end it even when it never listened (beforeAll timed out).
    await starting?.stop(server ? 'SIGTERM' : 'SIGKILL');
    await drop?.();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it(`answers ${REQUESTS} generated requests (seed ${SEED}) without a 5xx, a hang or an unsigned client response`, async () => {
    const { ctx, doc } = await prepareTarget(server.base, OWNER);
    const pid = server.child.pid!;
    let rssAfterWarmup = 0;
    const { failures, statuses } = await fuzz(ctx, doc, {
      // A liveness bound, not a speed target: the CI machine runs other suites beside this one.
      seed: SEED,
      count: REQUESTS,
      concurrency: 8,
      hangMs: 10_000,
      onProgress: (done) => {
        if (done === Math.floor(REQUESTS / 3)) rssAfterWarmup = rssOf(pid);
      },
    });
    expect(failures, JSON.stringify(failures.slice(0, 5), null, 1)).toEqual([]);
    // The run reaches past the gates: successes and schema refusals are both a real share of it.
    const share = (status: number) => (statuses.get(status) ?? 0) / REQUESTS;
    expect(share(200), JSON.stringify([...statuses])).toBeGreaterThan(0.05);
    expect(share(422), JSON.stringify([...statuses])).toBeGreaterThan(0.05);
    expect((await fetch(`${server.base}/healthz`)).status).toBe(200);
    const growth = rssOf(pid) - rssAfterWarmup;
    expect(growth, `RSS grew by ${Math.round(growth / 1e6)} MB over the last two thirds`).toBeLessThan(
      48 * 1024 * 1024,
    );
    expect(server.output.join('\n')).not.toContain('http.unhandled_error');
    expect(server.output.join('\n')).not.toMatch(/http\.handler_threw|ws\.handler_threw/);
  }, 180_000);

  it('answers generated WebSocket upgrades (cookies, sessions, keys, origins, subprotocols) below 500', async () => {
    const { ctx } = await prepareTarget(server.base, OWNER);
    const bad = fc.constantFrom(
      '%',
      '%E0',
      '%E0%A4%A',
      '%'.repeat(2000),
      'x'.repeat(5000),
      '',
      '\u00ff',
      ctx.token(),
      ctx.session(),
    );
    const upgrade = fc.record({
      path: fc.constantFrom('/api/ws', '/api/client/ws', '/api/ws?token=%E0', '/api/client/ws?x=%'),
      cookie: fc.option(bad.map((v) => `kw_session=${v}`)),
      session: fc.option(bad),
      nonce: fc.option(fc.oneof(bad, fc.string({ minLength: 43, maxLength: 43 }))),
      origin: fc.option(fc.constantFrom(server.base, 'http://evil.example', 'null', '%')),
      protocol: fc.option(fc.constantFrom('msgpack', 'x,y', ',,,', 'a'.repeat(300))),
      version: fc.option(bad),
    });
    const statuses = new Map<string, number>();
    for (const u of fc.sample(upgrade, { seed: SEED, numRuns: 300 })) {
      const headers: Record<string, string> = {};
      if (u.cookie !== null) headers.cookie = u.cookie;
      if (u.session !== null) headers['x-session'] = u.session;
      if (u.nonce !== null) headers['x-nonce'] = u.nonce;
      if (u.origin !== null) headers.origin = u.origin;
      if (u.version !== null) headers['x-client-version'] = u.version;
      if (u.protocol !== null) headers['sec-websocket-protocol'] = u.protocol; // raw: the ws client would refuse some
      const outcome = await new Promise<string>((resolve) => {
        const ws = new WebSocket(`${server.base.replace('http', 'ws')}${u.path}`, { headers });
        const timer = setTimeout(() => resolve('no answer'), 10_000);
        ws.once('unexpected-response', (_req, res) => {
          clearTimeout(timer);
          resolve(String(res.statusCode));
        });
        ws.once('open', () => {
          clearTimeout(timer);
          ws.close();
          resolve('open');
        });
        ws.once('error', (err) => {
          clearTimeout(timer);
          resolve(`error ${err.message}`);
        });
      });
      statuses.set(outcome, (statuses.get(outcome) ?? 0) + 1);
    }
    const summary = JSON.stringify([...statuses]);
    expect(
      [...statuses.keys()].filter((k) => !(k === 'open' || /^[1-4]\d\d$/.test(k) || k.startsWith('error'))),
      summary,
    ).toEqual([]);
    expect((statuses.get('401') ?? 0) + (statuses.get('403') ?? 0), summary).toBeGreaterThan(100);
    expect((await fetch(`${server.base}/healthz`)).status).toBe(200);
    expect(server.output.join('\n')).not.toMatch(/http\.handler_threw|ws\.handler_threw|http\.unhandled_error/);
  }, 120_000);

  // Last: its wrong guesses reach attempt limits (each round from addresses of its own).
  it('answers parallel bursts, lying Content-Lengths and credentials revoked in flight without a 5xx or a crash', async () => {
    const { ctx } = await prepareTarget(server.base, OWNER);
    const report = await hostile(ctx, { burst: 60, rounds: 2, hangMs: 10_000, owner: OWNER });
    const summary = JSON.stringify([...report.outcomes]);
    expect(report.failures, summary).toEqual([]);
    expect(report.requests).toBeGreaterThan(1_000);
    // The bursts reached the limits they are aimed at, so the run exercised them (429s were answered).
    expect(
      [...report.outcomes].some(([k, n]) => k.startsWith('burst dashboard password 429') && n > 0),
      summary,
    ).toBe(true);
    // No crash: the process is up, serves, and logged no unhandled rejection or uncaught exception.
    expect(server.child.exitCode, server.output.slice(-20).join('\n')).toBeNull();
    expect((await fetch(`${server.base}/healthz`)).status).toBe(200);
    expect(server.output.join('\n')).not.toMatch(
      /process\.unhandled_rejection|uncaughtException|Uncaught|http\.handler_threw|ws\.handler_threw|http\.unhandled_error/,
    );
  }, 90_000);
});
