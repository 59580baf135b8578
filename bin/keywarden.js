#!/usr/bin/env node
// `keywarden <command>` (and `npm run keywarden -- <command>`): runs the compiled CLI in dist/,
// building it first when it is missing or older than the sources (scripts/build.mjs), so the
// command line never needs a TypeScript loader. The CLI runs in this process: its exit code and
// its signal handling are the command's own.
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { ensureServerBuild, ensureWebBuildIfPresent } from '../scripts/build.mjs';

const args = process.argv.slice(2);
let cli;
try {
  if (args[0] === 'serve') await ensureWebBuildIfPresent();
  cli = await ensureServerBuild();
} catch (err) {
  console.error(`keywarden: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
}
if (!/--enable-source-maps\b/.test(process.env.NODE_OPTIONS ?? '')) {
  process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --enable-source-maps`.trim();
}
process.setSourceMapsEnabled(true);
// `relay` runs its own entry beside cli.js: it loads none of the server (docs/air-gapped.md).
const entry = args[0] === 'relay' ? path.join(path.dirname(cli), 'relay-cli.js') : cli;
process.argv = [process.argv[0], entry, ...args];
await import(pathToFileURL(entry).href);
