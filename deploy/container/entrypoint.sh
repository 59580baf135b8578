#!/bin/sh
# The image's entry point (under tini): `serve` first applies pending migrations with
# `keywarden migrate` (several replicas starting together take turns on PostgreSQL's advisory lock),
# then becomes the server itself, so SIGTERM from tini reaches its handler. Any other command is a
# `keywarden` command (migrate, secrets export, backup ...), or a program when it is not one.
set -e
case "${1:-serve}" in
  serve)
    node /app/dist/src/cli.js migrate
    exec node /app/dist/src/cli.js serve
    ;;
  relay)
    # The seat relay (docs/air-gapped.md): its own entry, no database, no Redis.
    exec node /app/dist/src/relay-cli.js "$@"
    ;;
  migrate | owner | developer | secrets | backup | restore | loadtest | worker)
    exec node /app/dist/src/cli.js "$@"
    ;;
  *)
    exec "$@"
    ;;
esac
