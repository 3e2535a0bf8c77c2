# compat-shim container image (SPEC §8). Build and smoke test: scripts/container-smoke.sh.
#
# Two stages on the same base: `deps` installs the production dependencies from the lockfile (no dev
# dependencies, so neither the `node` npm package nor TypeScript, Vitest or Biome reach the image); the
# final stage copies them next to the sources and runs `node src/main.ts` with Node 24's type
# stripping (there is no build step). The program handles SIGTERM/SIGINT itself as PID 1.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# --omit=dev: neither the `node` binary package nor TypeScript, Vitest or Biome are installed.
# --ignore-scripts: no production dependency has an install script (package.json's allowScripts names
# dev dependencies only). The checks fail the build if a dev dependency slipped in.
RUN --mount=type=cache,target=/root/.npm \
    npm ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error \
 && test ! -e node_modules/node && test ! -e node_modules/typescript && test ! -e node_modules/vitest

FROM ${NODE_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="compat-shim" \
      org.opencontainers.image.description="Reverse proxy that keeps legacy clients working while the backend renames tags to metadata" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="docker.io/library/node:24-bookworm-slim" \
      org.opencontainers.image.documentation="docs/operations.md"
ENV NODE_ENV=production \
    PORT=8080 \
    ADMIN_PORT=9090
WORKDIR /app
# Everything belongs to root and is read-only for the `node` user: the process writes nothing to disk
# (logs go to stdout), so the container also runs with a read-only root filesystem.
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY src ./src
USER node
EXPOSE 8080 9090
# Liveness of the process on the admin listener, with Node's own fetch (the slim image has no curl).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.ADMIN_PORT||9090)+'/healthz',{signal:AbortSignal.timeout(2000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
# Exec form, no shell and no entrypoint script in between: node is PID 1 and receives the signals.
# --expose-gc lets the shim scavenge dead socket buffers while streaming (src/proxy/memory.ts).
ENTRYPOINT ["node", "--expose-gc", "src/main.ts"]
CMD []
