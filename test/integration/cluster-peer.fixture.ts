// A cluster worker in a process of its own, for cluster-transport.test.ts: one ClusterNode on Redis
// with the direct transport on. Its 'stall' operation prints `running <args>` and never answers,
// so the test can SIGKILL the process while a call is in flight.
import { pino } from 'pino';
import { ClusterNode } from '../../src/platform/cluster/cluster-node.js';
import { RedisCoordinator } from '../../src/platform/cluster/redis.coordinator.js';

const [redisUrl, prefix] = process.argv.slice(2);
const coordinator = new RedisCoordinator(redisUrl!, prefix!);
const node = new ClusterNode(coordinator, pino({ level: 'silent' }), Date.now, {
  listen: { host: '127.0.0.1', port: 0 },
});
node.handle('stall', async (args) => {
  process.stdout.write(`running ${JSON.stringify(args)}\n`);
  return new Promise(() => undefined);
});
await node.start();
process.stdout.write(`ready ${node.id}\n`);
