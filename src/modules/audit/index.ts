// The audit module's public surface: the audit log.
// Other modules and the composition root import only this file.
export { AuditRepository } from './audit.repository.js';
export { auditRoutes } from './audit.routes.js';
export { AuditLog } from './audit.service.js';
