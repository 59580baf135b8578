// The commerce module's public surface: products, and orders fulfilled from shops' webhooks.
// Other modules and the composition root import only this file.
import type { Logger } from 'pino';
import type { Sql } from '../../platform/db/sql.js';
import type { RequestLimiter } from '../../platform/limits/compact-rate-limiter.js';
import type { Router } from '../../platform/http/router.js';
import type { DashboardAuth } from '../access/index.js';
import type { AppsService } from '../apps/index.js';
import type { AuditRepository } from '../audit/index.js';
import type { KeyGenerator } from '../keys/index.js';
import { CommerceRepository } from './commerce.repository.js';
import { commerceRoutes } from './commerce.routes.js';
import { FulfilService } from './fulfil.service.js';
import { ProductsService } from './products.service.js';

interface CommerceDeps {
  sql: Sql;
  log: Logger;
  now: () => number;
  audit: AuditRepository;
  apps: Pick<AppsService, 'visible'>;
  generator: Pick<KeyGenerator, 'generateForOrder'>;
  /** The keys module's previews of keys by id. */
  previews: ConstructorParameters<typeof ProductsService>[0]['previews'];
  sealKey: Buffer;
}

/** Builds the commerce module: products, and orders fulfilled from shops' webhooks. */
export function createCommerce(d: CommerceDeps) {
  const repo = new CommerceRepository(d.sql);
  const fulfil = new FulfilService({
    repo,
    generator: d.generator,
    audit: d.audit,
    sealKey: d.sealKey,
    log: d.log,
    now: d.now,
  });
  const products = new ProductsService({
    repo,
    apps: d.apps,
    previews: d.previews,
    audit: d.audit,
    sealKey: d.sealKey,
    now: d.now,
  });
  return {
    /** The application a product belongs to. */
    appOfProduct: (id: string) => repo.appOfProduct(id),
    mount(router: Router, r: { auth: DashboardAuth; portalLimiter: RequestLimiter }): void {
      commerceRoutes(router, { ...r, products, fulfil });
    },
    start: () => fulfil.start(),
    stop: () => fulfil.stop(),
  };
}
