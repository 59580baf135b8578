#!/usr/bin/env node
// Activates a license key and keeps a heartbeat running.
//
//   node examples/activate.mjs <license-key> [path/to/keywarden.json] [--beats N] [--base-url URL]
//
// Without --beats it beats until Ctrl-C. Exit code 0 on success, 1 with the error code otherwise.
import { Client, KeywardenError } from '@keywarden/client';

const args = process.argv.slice(2);
const flag = (name) => {
  const i = args.indexOf(name);
  if (i < 0) return undefined;
  const v = args[i + 1];
  args.splice(i, 2);
  return v;
};
const beats = Number(flag('--beats') ?? 0);
const baseUrl = flag('--base-url');
const [key, configPath = 'keywarden.json'] = args;
if (!key) {
  console.error('usage: node examples/activate.mjs <license-key> [keywarden.json] [--beats N] [--base-url URL]');
  process.exit(2);
}

try {
  const client = Client.fromConfig(configPath, baseUrl ? { baseUrl } : {});
  const app = await client.init();
  console.log(`connected to ${app.name} (version ${app.version})`);
  const license = await client.activateLicense(key);
  console.log(`license ok: level ${license.level}, expires ${license.expiresAt?.toISOString() ?? 'never'}`);

  // A short interval when a beat count is asked for, so the demo finishes quickly.
  const hb = await client.startHeartbeat(undefined, undefined, {
    reauth: true,
    ...(beats ? { intervalMs: 1000 } : {}),
  });
  console.log(`heartbeat started (server interval ${hb.beatInterval} s)`);
  hb.on('beat', (b) => {
    console.log(`beat ${b.index} verified (count ${b.count})`);
    if (beats && b.count >= beats) void hb.stop();
  });
  hb.on('degraded', (d) => console.warn(`heartbeat degraded: ${d.error.code} ${d.error.message}`));
  hb.on('recovered', () => console.warn('heartbeat recovered after re-authentication'));
  hb.on('killed', (k) => {
    console.error(`heartbeat killed: ${k.error.code} ${k.error.message}`);
    process.exitCode = 1;
  });
  hb.on('stopped', () => console.log('heartbeat stopped'));
  process.once('SIGINT', () => void hb.stop());
} catch (err) {
  if (err instanceof KeywardenError) {
    console.error(`failed: ${err.code}${err.reason ? ` (${err.reason})` : ''}: ${err.message}`);
    if (err.code === 'update_required') console.error(`download ${err.latestVersion} from ${err.updateUrl}`);
    if (err.retryAfter !== undefined) console.error(`retry after ${err.retryAfter} s`);
  } else {
    console.error(`failed: ${err.message}`);
  }
  process.exit(1);
}
