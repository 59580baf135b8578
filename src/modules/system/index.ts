// The system module's public surface: health, readiness, metrics and the OpenAPI document.
// Other modules and the composition root import only this file.
import type { Router } from '../../platform/http/router.js';
import { systemRoutes } from './system.routes.js';

/** Builds the system module: it holds nothing; its routes read the deps they are given. */
export function createSystem(d: Parameters<typeof systemRoutes>[1]) {
  return { mount: (router: Router) => systemRoutes(router, d) };
}
