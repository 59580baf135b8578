// The notify module's public surface: live events, dashboard live streams and webhooks.
// Other modules and the composition root import only this file.
export { EventBus, type LiveEvent } from './events.js';
export { LiveHub } from './live.js';
export { assertWebhookUrl, isPublicAddress } from './webhook-url.js';
export { WebhookRepository } from './webhook.repository.js';
export { WebhookService } from './webhooks.service.js';
export { DeliveryRepository } from './delivery.repository.js';
export { deliveriesRoutes } from './deliveries.routes.js';
