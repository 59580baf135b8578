// Expiry while running (docs/protocol.md 12.8) in the SDK tests: a program built with an SDK activates a harness
// key and beats on the realtime channel; once it says it is ready, the key's expires_at is moved to a
// moment shortly ahead, straight in the database (as the server's own expiry tests do: no route sets an
// expiry to the second), and the program must report `expired` within about a second of that moment,
// with no beat accepted after it.
//
// The program's protocol (test/sdk/programs/expiry-watch.*), one line each, times in unix ms:
//   ready <1 on the channel | 0>       the heartbeat started and a first beat verified
//   beat <index> <at>
//   expired <at>                       the SDK's `expired` event
//   killed <error code> <at>
//   state <state>                      the heartbeat's state once it ended (or at the timeout)
// and exits 0 once the heartbeat ended, 1 when it did not within its own timeout.
import { spawn } from 'node:child_process';
import pg from 'pg';
import { expect } from 'vitest';
import type { SdkHarness } from './sdk-harness.js';

/** Moves the expires_at of the activated harness key `key` (plaintext) of app `label` to `ms` from now. */
export async function expireKeyIn(h: SdkHarness, label: string, key: string, ms: number): Promise<number> {
  const appId = (JSON.parse(h.env.KW_APP_IDS!) as Record<string, string>)[label];
  const preview = `${key.slice(0, 4)}****${key.slice(-4)}`;
  const at = Date.now() + ms; // the database and the server run on this machine's clock
  const db = new pg.Client({ connectionString: h.server.databaseUrl });
  await db.connect();
  try {
    const r = await db.query(
      `update license_keys set expires_at = $1 where app_id = $2 and key_preview = $3 and status = 'used'`,
      [new Date(at), appId, preview],
    );
    if (r.rowCount !== 1) throw new Error(`expected one activated key ${preview} in app ${label}, found ${r.rowCount}`);
  } finally {
    await db.end();
  }
  return at;
}

export interface ExpiryRun {
  code: number | null;
  out: string;
  /** When the key was made to expire (unix ms). */
  at: number;
}

/**
 * Runs an expiry-watch program and, when it prints `ready`, makes its key expire `inMs` from then.
 * The program is killed after `timeoutMs`.
 */
export function runExpiryWatch(
  h: SdkHarness,
  label: string,
  key: string,
  program: { cmd: string; args: string[]; cwd: string; env?: Record<string, string> },
  inMs = 1500,
  timeoutMs = 60_000,
): Promise<ExpiryRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(program.cmd, program.args, { cwd: program.cwd, env: { ...process.env, ...program.env } });
    let out = '';
    let at = 0;
    let expiring: Promise<void> | undefined;
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (!expiring && /^ready [01]$/m.test(out)) {
        expiring = expireKeyIn(h, label, key, inMs).then(
          (t) => {
            at = t;
          },
          (err: unknown) => {
            child.kill('SIGKILL');
            reject(err as Error);
          },
        );
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      void (expiring ?? Promise.resolve()).then(() => resolve({ code, out, at }));
    });
  });
}

/**
 * The program reported the expiry over the channel within about a second of expires_at (the server pushes
 * within one; the rest is the program's own latency), as the state `expired` and a kill with code `expired`,
 * and no beat was accepted after it.
 */
export function expectExpiredOnTime(r: ExpiryRun): void {
  expect(r.out, r.out).toMatch(/^ready 1$/m); // beating on the realtime channel
  expect(r.at, r.out).toBeGreaterThan(0);
  expect(r.code, r.out).toBe(0);
  const expired = /^expired (\d+)$/m.exec(r.out);
  expect(expired, r.out).not.toBeNull();
  const reportedAt = Number(expired![1]);
  const late = reportedAt - r.at;
  expect(late, `expired reported ${late} ms after expires_at\n${r.out}`).toBeGreaterThanOrEqual(0);
  expect(late, `expired reported ${late} ms after expires_at\n${r.out}`).toBeLessThan(1500);
  expect(r.out).toMatch(/^killed expired \d+$/m);
  expect(r.out).toMatch(/^state expired$/m);
  expect(r.out).not.toMatch(/^revoked/m); // an expiry is not reported as a revocation
  const beats = [...r.out.matchAll(/^beat (\d+) (\d+)$/gm)].map((m) => Number(m[2]));
  expect(beats.length, r.out).toBeGreaterThanOrEqual(1);
  expect(
    beats.filter((t) => t > reportedAt),
    r.out,
  ).toEqual([]);
}
