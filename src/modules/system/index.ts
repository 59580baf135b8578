// The system module's public surface: health, readiness, metrics and the OpenAPI document.
// Other modules and the composition root import only this file.
export { systemRoutes } from './system.routes.js';
