// The commerce module's public surface: products, and orders fulfilled from shops' webhooks.
// Other modules and the composition root import only this file.
export { CommerceRepository } from './commerce.repository.js';
export { commerceRoutes } from './commerce.routes.js';
export { FulfilService } from './fulfil.service.js';
export { ProductsService } from './products.service.js';
