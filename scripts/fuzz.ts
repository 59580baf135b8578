// Long fuzz mode: `npm run fuzz -- --requests 100000 [--seed N] [--concurrency 8] [--burst 120 --rounds 5]`.
// Starts a real server (embedded PostgreSQL in a temporary DATA_DIR unless DATABASE_URL is set),
// runs the OpenAPI-generated fuzzer of test/fuzz against it, prints the statuses seen and the
// server's RSS along the way, then the hostile phase of test/fuzz/hostile.ts (parallel bursts, lying
// Content-Lengths, credentials revoked in flight), and exits 1 on any 5xx, hang over 2 s, unsigned
// client response, server crash or logged unhandled rejection / uncaught exception.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { spawnServer } from '../test/helpers/process.js';
import { fuzz } from '../test/fuzz/openapi-fuzzer.js';
import { prepareTarget, rssOf } from '../test/fuzz/target.js';
import { hostile } from '../test/fuzz/hostile.js';

const { values } = parseArgs({
  options: { requests: { type: 'string', default: '100000' }, seed: { type: 'string', default: String(Date.now() % 1e9) }, concurrency: { type: 'string', default: '8' }, burst: { type: 'string', default: '120' }, rounds: { type: 'string', default: '5' } },
});
const count = Number(values.requests);
const seed = Number(values.seed);
const owner = { username: 'fuzz-owner', password: 'fuzz-owner-pass-1' };
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kw-fuzz-'));
const server = await spawnServer({
  DATA_DIR: dataDir, OWNER_USERNAME: owner.username, OWNER_PASSWORD: owner.password, TRUSTED_PROXIES: '127.0.0.1',
  ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
});
const pid = server.child.pid!;
let code = 0;
try {
  const { ctx, doc } = await prepareTarget(server.base, owner);
  const mb = () => `${Math.round(rssOf(pid) / 1e6)} MB`;
  console.log(`fuzzing ${server.base} with ${count} requests, seed ${seed}; server RSS ${mb()}`);
  const started = Date.now();
  const step = Math.max(1000, Math.floor(count / 20));
  const { failures, statuses } = await fuzz(ctx, doc, {
    seed, count, concurrency: Number(values.concurrency), hangMs: 2_000,
    onProgress: (done) => {
      if (done % step === 0) console.log(`${done} requests, ${Math.round(done / ((Date.now() - started) / 1000))}/s, server RSS ${mb()}`);
    },
  });
  console.log('statuses:', Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])));
  if (failures.length > 0) {
    code = 1;
    console.error(`${failures.length} failure(s):`);
    for (const f of failures) console.error(JSON.stringify(f));
  } else {
    console.log(`no 5xx, no hang, every client response signed; server RSS ${mb()}`);
  }
  const report = await hostile(ctx, { burst: Number(values.burst), rounds: Number(values.rounds), hangMs: 10_000, owner });
  console.log(`hostile phase: ${report.requests} requests`, Object.fromEntries(report.outcomes));
  const log = server.output.join('\n');
  if (server.child.exitCode !== null) report.failures.push(`the server exited with ${server.child.exitCode}`);
  if (/process\.unhandled_rejection|uncaughtException|Uncaught/.test(log))
    report.failures.push('the server logged an unhandled rejection or an uncaught exception');
  if (report.failures.length > 0) {
    code = 1;
    console.error(`hostile phase: ${report.failures.length} failure(s):`);
    for (const f of report.failures) console.error(f);
  } else {
    console.log(`hostile phase: no 5xx, no hang, no crash; server RSS ${mb()}`);
  }
} finally {
  await server.stop('SIGTERM');
  fs.rmSync(dataDir, { recursive: true, force: true });
}
process.exit(code);
