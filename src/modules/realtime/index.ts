// The realtime module's public surface: the realtime client channel and what it pushes.
// Other modules and the composition root import only this file.
import type { Metrics } from '../../platform/http/metrics.js';
import type { Router } from '../../platform/http/router.js';
import type { HttpServer } from '../../platform/http/uws.js';
import type { DashboardAuth } from '../access/index.js';
import { channelRoutes } from './channel.routes.js';
import { ClientChannel } from './client-channel.js';
import { ClientPushService } from './client-push.service.js';

export type { ClientChannel };

type PushDeps = ConstructorParameters<typeof ClientPushService>[0];
type ChannelDeps = ConstructorParameters<typeof ClientChannel>[0];

/** Builds the realtime module: what is pushed to clients; the channel itself is mounted on the server. */
export function createRealtime(d: PushDeps) {
  const push = new ClientPushService(d);
  return {
    push,
    /** The realtime client channel, started and mounted, and its dashboard routes. */
    mount(
      server: HttpServer,
      router: Router,
      r: Omit<ChannelDeps, 'push'> & { auth: DashboardAuth; metrics: Pick<Metrics, 'gauge'> },
    ): ClientChannel {
      const { auth, metrics, ...deps } = r;
      const channel = new ClientChannel({ ...deps, push });
      channel.start();
      channel.mount(server);
      channelRoutes(router, { auth, push });
      metrics.gauge(
        'keywarden_channel_connections',
        'Realtime channel connections open on this worker',
        () => channel.size,
      );
      metrics.gauge(
        'keywarden_channel_pushes_total',
        'Messages pushed on realtime channels by this worker',
        () => channel.pushed,
      );
      metrics.gauge(
        'keywarden_channel_slow_dropped_total',
        'Realtime channels closed because the client did not read fast enough',
        () => channel.dropped,
      );
      return channel;
    },
    start: () => push.start(),
    stop: () => push.stop(),
  };
}
