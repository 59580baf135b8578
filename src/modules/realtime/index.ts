// The realtime module's public surface: the realtime client channel and what it pushes.
// Other modules and the composition root import only this file.
export { channelRoutes } from './channel.routes.js';
export { ClientChannel } from './client-channel.js';
export { ClientPushService } from './client-push.service.js';
