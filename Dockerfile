# compat-shim container image (SPEC §8). Build and smoke test: scripts/container-smoke.sh.
#
# Stages on the same base: `build` installs the locked dependencies and bundles src/main.ts with
# esbuild into one self-contained file (scripts/build.ts); the final stage holds that file and nothing
# else of the project: no node_modules, no sources, no reference backend (`--demo` fails there with a
# clear message; docs/operations.md "Demo mode"). The program handles SIGTERM/SIGINT itself as PID 1.
ARG NODE_IMAGE=node:24-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The workspace's manifest only, so that `npm ci` matches the lockfile; its sources stay out of this stage.
COPY reference-backend/package.json ./reference-backend/
# --ignore-scripts: no install script is needed to bundle (esbuild's binary comes from its platform
# package); the `node` npm package is installed but not used (the base image's node runs the build).
RUN --mount=type=cache,target=/root/.npm \
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
COPY scripts/build.ts ./scripts/
COPY src ./src
RUN node scripts/build.ts && test -s dist/main.js

# Not the production image: the reference backend for deploy/compose.yaml and local trials
# (`podman build --target reference-backend`). Built only when asked for.
FROM build AS reference-backend
COPY reference-backend/tsconfig.json ./reference-backend/
COPY reference-backend/src ./reference-backend/src
RUN npm run build -w @compat-shim/reference-backend
USER node
EXPOSE 3000
ENTRYPOINT ["node", "reference-backend/dist/main.js", "--host", "0.0.0.0", "--port", "3000"]

# The production image (the default target: the last stage).
FROM ${NODE_IMAGE}
# Declared again to be read in this stage (the label below).
ARG NODE_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="compat-shim" \
      org.opencontainers.image.description="Reverse proxy that keeps legacy clients working while the backend renames tags to metadata" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.base.name="${NODE_IMAGE}"
# Idle memory (docs/operations.md "Footprint"): 70 MiB VmRSS in this image. The bundle does most of it
# (scripts/build.ts: built-ins loaded by require, zod tree-shaken, no double-byte code-page tables:
# 82 -> 70 MiB); MALLOC_*: glibc returns freed native memory to the system instead of keeping
# per-thread arenas around: -3 MiB, measured (73 MiB without them).
ENV NODE_ENV=production \
    PORT=8080 \
    ADMIN_PORT=9090 \
    MALLOC_ARENA_MAX=2 \
    MALLOC_TRIM_THRESHOLD_=131072 \
    MALLOC_MMAP_THRESHOLD_=131072
# The package managers of the base image run nothing here: gone from the container's file system, so
# that scanners have fewer packages to flag and an intruder fewer tools (npm, npx, yarn, corepack; the
# image is no smaller: their files stay in the base image's layer).
RUN rm -rf /usr/local/lib/node_modules /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack \
      /usr/local/bin/yarn /usr/local/bin/yarnpkg /opt/yarn-*
WORKDIR /app
# Owned by root and read-only for the `node` user: the process writes nothing to disk (logs go to
# stdout), so the container also runs with a read-only root filesystem.
COPY --from=build /app/dist/main.js ./dist/main.js
# The `node` user by number: Kubernetes' `runAsNonRoot` can verify a numeric user only.
USER 1000:1000
EXPOSE 8080 9090
# Liveness of the process on the admin listener, with Node's own fetch (the slim image has no curl), at
# HOST when the listeners bind one address (127.0.0.1 when they bind every address: unset, 0.0.0.0, ::
# in any spelling).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["node", "-e", "const h=process.env.HOST||'';const a=/^(0\\.0\\.0\\.0|[0:]*|[0:]*:ffff:0\\.0\\.0\\.0)$/i.test(h)?'127.0.0.1':h.includes(':')?'['+h+']':h;fetch('http://'+a+':'+(process.env.ADMIN_PORT||9090)+'/healthz',{signal:AbortSignal.timeout(2000)}).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
# Exec form, no shell and no entrypoint script in between: node is PID 1 and receives the signals.
# UPSTREAM_URL is required (the shim fails closed without it). The V8 flags are those of `npm start`
# (docs/operations.md "Memory flags"): --max-semi-space-size=2 caps the young generation at 2 x 2 MiB;
# --scavenger-max-new-space-capacity-mb=4 makes V8 scavenge once 16 MiB of socket-read buffers held by
# young objects pile up, instead of letting 64 MiB accumulate for a full collection; --max-old-space-size=256
# bounds the JavaScript heap at what Node itself picks in the manifests' 512 MiB container, on any host.
# Idle RSS is the same.
ENTRYPOINT ["node", "--max-semi-space-size=2", "--scavenger-max-new-space-capacity-mb=4", "--max-old-space-size=256", "dist/main.js"]
CMD []
