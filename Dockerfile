# syntax=docker/dockerfile:1
# Keywarden's container image: Debian 13 (trixie) slim with Node.js 24 LTS, the compiled server,
# the dashboard and the SDK sources (for the dashboard's SDK downloads); docs/deploy.md.
#
#   docker build -t keywarden .
#   docker run -d -p 8080:8080 -v keywarden-data:/data \
#     -e OWNER_USERNAME=owner -e OWNER_PASSWORD='a long password' keywarden
#
# BASE_IMAGE selects the base (the CI test builds one from Debian's packages, as no container
# registry is reachable there); anything Debian 13 with Node.js 24 at /usr/local/bin and npm works.
ARG BASE_IMAGE=node:24-trixie-slim

# Production dependencies only. npm ci runs no install script but those package.json's allowScripts
# allows (the embedded PostgreSQL's library links, esbuild's and msgpackr-extract's checks of their
# prebuilt binaries), whatever npm version the base image carries; the image has no compiler, so
# nothing can be built natively: every native module comes prebuilt for linux-x64-glibc. Then what
# this runtime never loads goes: the 20.30 uWebSockets.js build (Node.js 20 only) and the native
# binaries of other platforms and Node.js versions (about 240 MB).
FROM ${BASE_IMAGE} AS deps
WORKDIR /app
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
COPY package.json package-lock.json ./
COPY web/package.json web/
RUN npm ci --omit=dev --ignore-scripts --workspaces=false --include-workspace-root \
  && npm rebuild $(node -p "Object.entries(require('./package.json').allowScripts ?? {}).filter(([, v]) => v === true).map(([k]) => k).join(' ')") \
  && rm -rf /root/.npm \
  && abi=$(node -p process.versions.modules) arch=$(node -p process.arch) \
  && rm -rf node_modules/uws-legacy \
  && find node_modules/uWebSockets.js -name 'uws_*.node' ! -name "uws_linux_${arch}_${abi}.node" -delete \
  && find node_modules/sodium-native/prebuilds -mindepth 1 -maxdepth 1 ! -name "linux-${arch}" -exec rm -rf {} +

# The build: every dependency (TypeScript, Vite), then dist/ (the server) and web/dist (the dashboard).
FROM ${BASE_IMAGE} AS build
WORKDIR /src
ENV npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
COPY package.json package-lock.json ./
COPY web/package.json web/
RUN npm ci --ignore-scripts \
  && npm rebuild $(node -p "Object.entries(require('./package.json').allowScripts ?? {}).filter(([, v]) => v === true).map(([k]) => k).join(' ')")
COPY tsconfig.json tsconfig.build.json ./
COPY scripts scripts
COPY src src
COPY web web
RUN node scripts/build.mjs

FROM ${BASE_IMAGE}
# tini is PID 1: it passes SIGTERM on to the server (which drains, hands its shards over and stops
# the embedded PostgreSQL in that order) and reaps what the database's processes leave behind.
RUN apt-get update \
  && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends tini \
  && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/apt /var/log/dpkg.log \
  && groupadd --system --gid 10001 keywarden \
  && useradd --system --uid 10001 --gid keywarden --home-dir /app --no-create-home --shell /usr/sbin/nologin keywarden \
  && install -d -o keywarden -g keywarden -m 0700 /data
WORKDIR /app
COPY --from=deps /app/node_modules node_modules
COPY package.json package-lock.json ./
COPY --from=build /src/dist dist
COPY --from=build /src/web/dist web/dist
COPY sdk sdk
COPY deploy/container/keywarden deploy/container/entrypoint.sh /usr/local/bin/
ENV NODE_ENV=production \
  NODE_OPTIONS=--enable-source-maps \
  DATA_DIR=/data \
  HOST=0.0.0.0 \
  PORT=8080 \
  MALLOC_ARENA_MAX=2 \
  MALLOC_TRIM_THRESHOLD_=131072
# The embedded PostgreSQL's files, the generated keys (DATA_DIR/secrets) and screenshots.
VOLUME /data
EXPOSE 8080
USER keywarden
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch(`http://127.0.0.1:${process.env.PORT || 8080}/healthz`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/entrypoint.sh"]
CMD ["serve"]
