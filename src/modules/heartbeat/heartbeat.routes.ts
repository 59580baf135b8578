// The heartbeat calls over REST: start, beat, stop (the realtime channel carries the same calls).
import type { Router } from '../../platform/http/router.js';
import { BeatBody, StartBody, StopBody, clientDoc, clientHandler, type ClientDeps } from '../client/index.js';
import type { HeartbeatGateway } from './heartbeat.gateway.js';

interface HeartbeatRoutesDeps {
  gate: ClientDeps;
  heartbeats: Pick<HeartbeatGateway, 'start' | 'beat' | 'stop' | 'refusals'>;
}

export function heartbeatRoutes(router: Router, { gate, heartbeats }: HeartbeatRoutesDeps): void {
  // docs/protocol.md 11.39: calls for unknown sessions spend their address's refusal budget.
  const unknownSessions = heartbeats.refusals;
  router.add({
    method: 'post',
    path: '/api/client/heartbeat/start',
    doc: clientDoc('Start a heartbeat session', StartBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.heartbeat.start',
        schema: StartBody,
        identifiesBy: 'session',
        disabledDetail: 'plain',
        unknownSessions,
      },
      (c) => heartbeats.start(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/heartbeat',
    doc: clientDoc('One heartbeat', BeatBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.heartbeat',
        schema: BeatBody,
        identifiesBy: 'session',
        disabledDetail: 'plain',
        recentSession: true,
        unknownSessions,
      },
      (c) => heartbeats.beat(c),
    ),
  });
  router.add({
    method: 'post',
    path: '/api/client/heartbeat/stop',
    doc: clientDoc('Stop a heartbeat session', StopBody),
    handler: clientHandler(
      gate,
      {
        action: 'client.heartbeat.stop',
        schema: StopBody,
        identifiesBy: 'session',
        disabledDetail: 'plain',
        unknownSessions,
      },
      (c) => heartbeats.stop(c),
    ),
  });
}
