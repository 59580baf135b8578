// The activation module's public surface: init, register, login, license: sessions activated by keys and end users.
// Other modules and the composition root import only this file.
export { activationRoutes } from './activation.routes.js';
export { ActivationService, clientLockout } from './activation.service.js';
export { type Device, DeviceRepository } from './device.repository.js';
export { EndUserRepository } from './end-user.repository.js';
export { KeyTouchesRepository } from './key-touches.repository.js';
export { licenseEffects } from './license-effects.js';
export { LicenseHost } from './license-host.js';
export { LicenseOpsRepository } from './license-ops.repository.js';
export { type LicenseOps, routeLicenses } from './license-routing.js';
export { ScreenshotRepository } from './screenshot.repository.js';
export { ScreenshotStore } from './screenshots.js';
export { TrialRepository } from './trial.repository.js';
