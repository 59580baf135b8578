// The geo module's public surface: where an address is, and where a key or user was seen.
// Other modules and the composition root import only this file.
export { ActivationGeo, alertReasons, type Sighting } from './activation-geo.js';
export { GeoLocator, locationText } from './geo.js';
export { GeoRepository } from './geo.repository.js';
