// `keywarden relay` (docs/air-gapped.md "The relay"): a seat server for a network with no way out. It
// holds one verified pool and leases its seats to machines by HWID, 15 minutes at a time. It needs no
// database and no Redis and loads nothing of the service but the HTTP adapter and the pool format.
import type { Logger } from 'pino';
import { AppError, validationError } from '../../../errors.js';
import { Router } from '../../../platform/http/router.js';
import { jsonReply, textReply, type Reply } from '../../../platform/http/types.js';
import type { HttpServer } from '../../../platform/http/uws.js';
import { verifyPool, type PoolPayload } from '../pool-file.js';
import { LeaseStore, type Lease } from './lease-store.js';
import { statusPage } from './status-page.js';

export class RelayRefusal extends Error {}

/** Why a pool cannot be served here; a message for the operator, or the pool's payload. */
export function checkPool(pool: string, publicKey: Uint8Array, ownRelayId: string, now: number): PoolPayload {
  const v = verifyPool(pool, publicKey);
  if (!v.ok) throw new RelayRefusal('the pool does not verify under the given public key (wrong key, or altered pool)');
  const p = v.payload;
  if (Date.parse(p.valid_until) <= now)
    throw new RelayRefusal(`the pool expired at ${p.valid_until}; issue a new one from the dashboard`);
  if (p.relay_id !== ownRelayId)
    throw new RelayRefusal(
      `the pool is for relay ${p.relay_id}, but this machine is relay ${ownRelayId} (see \`keywarden relay id\`)`,
    );
  return p;
}

const HWID = /^[^\u0000-\u001f\u007f]{1,256}$/;

/**
 * `{"hwid"}` (1-256 printable characters, nothing else), checked by hand: the server's schema compiler
 * would add a third of the relay's start-up time for this one field. Same answers: 400 and 422.
 */
function leaseHwid(body: Buffer): string {
  let v: unknown;
  try {
    v = JSON.parse(body.toString('utf8'));
  } catch {
    throw new AppError('malformed_json');
  }
  const fields = typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  for (const k of Object.keys(fields))
    if (k !== 'hwid') throw validationError(k, 'Unexpected property', 'additional_properties');
  const hwid = fields.hwid;
  if (typeof hwid !== 'string' || !HWID.test(hwid))
    throw validationError('hwid', 'Expected 1-256 printable characters on one line', 'value_error');
  return hwid;
}

interface RelayOptions {
  /** A server on uWS made by the caller (modules see no uWS: relay-cli.ts builds it in platform/http). */
  server: HttpServer;
  pool: string;
  payload: PoolPayload;
  dataDir: string;
  host: string;
  port: number;
  log: Logger;
  now: () => number;
}

interface RunningRelay {
  port: number;
  stop(): Promise<void>;
}

export async function startRelay(o: RelayOptions): Promise<RunningRelay> {
  const p = o.payload;
  const validUntil = Date.parse(p.valid_until);
  const store = await LeaseStore.open({ dir: o.dataDir, licenseId: p.license_id, now: o.now });
  const view = (l: Lease) => ({
    lease_id: l.id,
    hwid: l.hwid,
    expires_at: new Date(l.expiresAt).toISOString(),
    pool: o.pool,
  });
  const live = () => o.now() < validUntil;
  const status = () => ({
    seats: p.seats,
    in_use: store.inUse(),
    valid_until: p.valid_until,
    license_id: p.license_id,
  });

  const router = new Router();
  const doc = { summary: 'relay', tag: 'relay', auth: 'none' as const };
  router.add({
    method: 'post',
    path: '/relay/v1/leases',
    doc,
    handler: async (req): Promise<Reply> => {
      if (req.body === 'too_large') throw new AppError('payload_too_large');
      const hwid = leaseHwid(req.body).toLowerCase();
      // Past valid_until the pool grants nothing: no seat is available any more.
      const lease = live() ? await store.acquire(hwid, p.seats) : null;
      if (!lease) throw new AppError('relay_no_seats');
      return jsonReply(201, view(lease));
    },
  });
  router.add({
    method: 'put',
    path: '/relay/v1/leases/:id',
    doc,
    handler: async (req): Promise<Reply> => {
      const lease = live() ? await store.renew(req.params.id ?? '') : null;
      if (!lease) throw new AppError('relay_lease_not_found');
      return jsonReply(200, view(lease));
    },
  });
  router.add({
    method: 'delete',
    path: '/relay/v1/leases/:id',
    doc,
    handler: async (req): Promise<Reply> => {
      if (!(await store.release(req.params.id ?? ''))) throw new AppError('relay_lease_not_found');
      return { status: 204, headers: {}, body: '' };
    },
  });
  router.add({ method: 'get', path: '/relay/v1/status', doc, handler: () => jsonReply(200, status()) });
  router.add({
    method: 'get',
    path: '/',
    doc,
    handler: () =>
      textReply(200, statusPage({ ...status(), now: o.now(), leases: store.leases() }), 'text/html; charset=utf-8'),
  });

  const server = o.server;
  router.mount(server);
  server.mountFallback(() => {
    throw new AppError('route_not_found');
  });
  let port: number;
  try {
    port = await server.listen(o.host, o.port);
  } catch (err) {
    await store.close();
    throw err;
  }
  o.log.info({ port, relay_id: p.relay_id, seats: p.seats, valid_until: p.valid_until }, 'relay.listening');
  let stopping: Promise<void> | undefined;
  return {
    port,
    stop: () =>
      (stopping ??= (async () => {
        server.stopListening();
        await server.drain(5_000);
        await store.close();
      })()),
  };
}
