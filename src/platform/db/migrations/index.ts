import type { MigrationObject } from '@mikro-orm/core';
import { Migration20261121000000Initial } from './Migration20261121000000Initial.js';
import { Migration20261122000000HostileInput } from './Migration20261122000000HostileInput.js';
import { Migration20261123000000Geo } from './Migration20261123000000Geo.js';
import { Migration20261125000000Resilience } from './Migration20261125000000Resilience.js';
import { Migration20261127000000Operators } from './Migration20261127000000Operators.js';
import { Migration20261128000000Models } from './Migration20261128000000Models.js';
import { Migration20261128010000Seats } from './Migration20261128010000Seats.js';
import { Migration20261128020000Daily } from './Migration20261128020000Daily.js';
import { Migration20261128030000Hosts } from './Migration20261128030000Hosts.js';
import { Migration20261128040000Portal } from './Migration20261128040000Portal.js';
import { Migration20261128050000Beats } from './Migration20261128050000Beats.js';
import { Migration20261207000000Security } from './Migration20261207000000Security.js';
import { Migration20261207500000Deliveries } from './Migration20261207500000Deliveries.js';
import { Migration20261207510000Jobs } from './Migration20261207510000Jobs.js';

// Every migration, in order. New migrations are appended here (and committed).
export const MIGRATIONS: MigrationObject[] = [
  { name: 'Migration20261121000000Initial', class: Migration20261121000000Initial },
  { name: 'Migration20261122000000HostileInput', class: Migration20261122000000HostileInput },
  { name: 'Migration20261123000000Geo', class: Migration20261123000000Geo },
  { name: 'Migration20261125000000Resilience', class: Migration20261125000000Resilience },
  { name: 'Migration20261127000000Operators', class: Migration20261127000000Operators },
  { name: 'Migration20261128000000Models', class: Migration20261128000000Models },
  { name: 'Migration20261128010000Seats', class: Migration20261128010000Seats },
  { name: 'Migration20261128020000Daily', class: Migration20261128020000Daily },
  { name: 'Migration20261128030000Hosts', class: Migration20261128030000Hosts },
  { name: 'Migration20261128040000Portal', class: Migration20261128040000Portal },
  { name: 'Migration20261128050000Beats', class: Migration20261128050000Beats },
  { name: 'Migration20261207000000Security', class: Migration20261207000000Security },
  { name: 'Migration20261207500000Deliveries', class: Migration20261207500000Deliveries },
  { name: 'Migration20261207510000Jobs', class: Migration20261207510000Jobs },
];
