#!/usr/bin/env node
// `npm start`: the production entry point. Builds what is stale (the web dashboard when
// scripts/build-web.mjs exists, then dist/ from src/ with tsc), then runs the compiled
// `keywarden serve` in this very process: no TypeScript loader, no esbuild process, no extra
// process between the supervisor (npm, systemd) and the server, so SIGTERM and SIGINT reach the
// server's own handlers exactly as they would with `node dist/src/cli.js serve`.
import { pathToFileURL } from 'node:url';
import { ensureServerBuild, ensureWebBuildIfPresent } from './build.mjs';

let cli;
try {
  await ensureWebBuildIfPresent();
  cli = await ensureServerBuild();
} catch (err) {
  console.error(`keywarden: cannot start: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}

// Stack traces in the logs point at src/*.ts lines (tsc emits the maps); through NODE_OPTIONS so
// cluster workers, which the supervisor starts as `node dist/src/cli.js worker`, get them too.
if (!/--enable-source-maps\b/.test(process.env.NODE_OPTIONS ?? '')) {
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --enable-source-maps`.trim();
}
process.setSourceMapsEnabled(true);

// The CLI reads its command from process.argv, as if started as `node dist/src/cli.js serve`.
process.argv = [process.argv[0], cli, 'serve'];
await import(pathToFileURL(cli).href);
