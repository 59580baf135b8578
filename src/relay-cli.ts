// `keywarden relay ...`: the seat relay for air-gapped networks (docs/air-gapped.md). A separate entry
// from cli.ts so that it loads only the HTTP adapter, the pool format and the lease store (no database,
// no Redis, no server graph) and starts in well under a second. bin/keywarden.js and the image's
// entry point run it directly; `node dist/src/cli.js relay` hands over to it as well.
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { createLogger } from './logger.js';
import { createClientIpResolver } from './platform/http/client-ip.js';
import { createHttpServer, loadUws } from './platform/http/uws.js';
import { RelayIdError, relayId } from './modules/airgap/relay/relay-id.js';
import { RelayRefusal, checkPool, startRelay } from './modules/airgap/relay/relay.server.js';

const USAGE = `usage:
  keywarden relay --pool FILE --public-key KEY [--port P] [--host H] [--data DIR]
      serve the seats of POOL (kwpool1.) on this network; KEY: the base64 signing public key
      of GET /api/client/keys that the pool's kid names (or a file holding it)
  keywarden relay id                                print this machine's relay id`;

const DEFAULT_PORT = 7770;

function readKey(value: string): Buffer {
  const text = fs.existsSync(value) ? fs.readFileSync(value, 'utf8').trim() : value.trim();
  const key = Buffer.from(text, 'base64');
  if (key.length !== 32) throw new RelayRefusal('--public-key is not a base64 Ed25519 public key (32 bytes)');
  return key;
}

async function relay(args: string[]): Promise<number> {
  if (args[0] === 'id') {
    console.log(relayId());
    return 0;
  }
  const { values } = parseArgs({
    args,
    options: {
      pool: { type: 'string' },
      'public-key': { type: 'string' },
      port: { type: 'string' },
      host: { type: 'string' },
      data: { type: 'string' },
    },
    strict: true,
  });
  if (!values.pool || !values['public-key']) {
    console.error(USAGE);
    return 2;
  }
  const pool = fs.readFileSync(values.pool, 'utf8').trim();
  const payload = checkPool(pool, readKey(values['public-key']), relayId(), Date.now());
  const log = createLogger({ logLevel: 'info' }, { relay: true });
  const running = await startRelay({
    server: createHttpServer(loadUws(), { log, resolveIp: createClientIpResolver([]) }),
    pool,
    payload,
    dataDir: values.data ?? 'keywarden-relay-data',
    host: values.host ?? '0.0.0.0',
    port: values.port === undefined ? DEFAULT_PORT : Number(values.port),
    log,
    now: Date.now,
  });
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await running.stop();
  log.info('relay.stopped');
  return 0;
}

const args = process.argv.slice(2);
relay(args[0] === 'relay' ? args.slice(1) : args).then(
  (code) => process.exit(code),
  (err: unknown) => {
    const known = err instanceof RelayRefusal || err instanceof RelayIdError || (err as { code?: string }).code;
    console.error(`keywarden relay: ${err instanceof Error ? err.message : String(err)}`);
    if (!known) console.error(err);
    process.exit(1);
  },
);
