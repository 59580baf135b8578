// The geo module's public surface: where an address is, and where a key or user was seen.
// Other modules and the composition root import only this file.
import { ActivationGeo } from './activation-geo.js';

export { alertReasons, type Sighting } from './activation-geo.js';
export { GeoLocator, locationText } from './geo.js';
export type { ActivationGeo };

/** Builds the geo module's activation side: where a key or user was seen, and the alerts it raises. */
export function createGeo(d: ConstructorParameters<typeof ActivationGeo>[0]) {
  return { activation: new ActivationGeo(d) };
}
