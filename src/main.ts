// Wires config -> services -> app, listens, and owns the shutdown order:
// stop accepting -> finish in-flight requests -> close coordination and the database -> stop the
// embedded PostgreSQL.
import type { Config } from './config.js';
import type { Clock } from './clock.js';
import { createLogger, type Logger } from './logger.js';
import { createApp, type App } from './app.js';
import { createServices, type Services } from './services.js';

export interface RunningServer {
  readonly port: number;
  readonly services: Services;
  readonly app: App;
  /** Idempotent; resolves when everything is closed. */
  shutdown(reason?: string): Promise<void>;
}

export interface StartOptions {
  clock?: Clock;
  log?: Logger;
}

export async function startServer(config: Config, opts: StartOptions = {}): Promise<RunningServer> {
  const log = opts.log ?? createLogger(config);
  const services = await createServices(config, log, opts.clock ? { clock: opts.clock } : {});
  let app: App;
  let port: number;
  try {
    app = createApp(services);
    await app.domain.start();
    await bootstrapAccounts(config, app, log);
    port = await app.server.listen(config.host, config.port);
    // The worker's own port: a balancer that routes on X-Keywarden-Route reaches exactly this worker.
    if (config.affinityPort > 0) await app.server.listen(config.host, config.affinityPort + config.workerIndex);
  } catch (err) {
    await services.close();
    throw err;
  }
  log.info(
    { host: config.host, port, coordination: services.coordinator.kind, embeddedDb: !config.databaseUrl },
    'server.listening',
  );

  let stopping: Promise<void> | undefined;
  const shutdown = (reason = 'shutdown') =>
    (stopping ??= (async () => {
      log.info({ reason }, 'server.stopping');
      if (config.drainLingerMs > 0) {
        // Behind a balancer with pooled connections (docs/multi-host.md "Rolling upgrades"): refused
        // new connections send it elsewhere, and the open ones are answered and closed one by one
        // until the balancer has let the idle ones go, so none is closed under a request it is writing.
        app.server.stopAccepting();
        await new Promise((r) => setTimeout(r, config.drainLingerMs));
      }
      app.server.stopListening();
      const drained = await app.server.drain(config.shutdownTimeoutMs);
      if (!drained) log.warn('server.drain_timeout: requests still in flight were cut off');
      await app.domain.stop();
      await services.close();
      log.info('server.stopped');
    })());
  return { port, services, app, shutdown };
}

async function bootstrapAccounts(config: Config, app: App, log: Logger): Promise<void> {
  if (config.ownerUsername && config.ownerPassword) {
    if (await app.domain.access.auth.ensureOwner(config.ownerUsername, config.ownerPassword)) {
      log.info({ username: config.ownerUsername }, 'account.owner_created');
    }
  }
  if (config.developerUsername && config.developerPassword) {
    if (await app.domain.access.auth.ensureDeveloper(config.developerUsername, config.developerPassword)) {
      log.info({ username: config.developerUsername }, 'account.developer_created');
    }
  }
}
