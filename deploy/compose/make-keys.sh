#!/bin/sh
# Prints new deployment keys in the format of `keywarden secrets export` (docs/multi-host.md):
#   deploy/compose/make-keys.sh > deploy/compose/keys.env && chmod 600 deploy/compose/keys.env
# Moving an existing installation instead: `keywarden secrets export > deploy/compose/keys.env` there.
set -eu
key() { head -c 32 /dev/urandom | base64; }
echo "RESPONSE_SIGNING_KEY=$(key)"
echo "RESPONSE_SIGNING_KID=k1"
echo "LICENSE_HASH_KEY=$(key)"
echo "TWO_FACTOR_KEY=$(key)"
