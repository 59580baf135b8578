// The airgap module's public surface (docs/air-gapped.md): activation by file for machines that never
// reach the service, and seat pools for `keywarden relay`. The relay itself (./relay/) is a separate
// entry (src/relay-cli.ts) that loads none of this.
import type { Router } from '../../platform/http/router.js';
import { airgapRoutes, type AirgapRoutesDeps } from './airgap.routes.js';
import { AirgapService, type AirgapDeps } from './airgap.service.js';

interface AirgapHandle {
  /** Mounts the dashboard's and the portal's routes. */
  mount(router: Router, r: Omit<AirgapRoutesDeps, 'airgap'>): void;
}

/** Builds the airgap module; it owns no table (keys and devices change through activation and keys). */
export function createAirgap(deps: AirgapDeps): AirgapHandle {
  const airgap = new AirgapService(deps);
  return { mount: (router, r) => airgapRoutes(router, { ...r, airgap }) };
}
