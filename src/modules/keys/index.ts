// The keys module's public surface: license keys and end users on the dashboard.
// Other modules and the composition root import only this file.
export { checkedCodes, KeyGenerator, settleKeySpec } from './generate.service.js';
export { KeyAdminRepository } from './key-admin.repository.js';
export { keysRoutes } from './keys.routes.js';
export { KeysAdminService } from './keys.service.js';
export { graceField } from './grace.js';
export { DEFAULT_ALPHABET, durationMs, expandMask, keyPreview, licenseHash } from './license-keys.js';
export { computedStatus, hasExpired } from './license-status.js';
export { LicenseRepository } from './license.repository.js';
