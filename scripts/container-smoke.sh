#!/usr/bin/env bash
# Builds the compat-shim image with podman and smoke-tests it as a sidecar: one pod, a stub upstream
# container (the base image running a few lines of node:http; the image itself holds no backend) and
# the shim with UPSTREAM_URL=http://127.0.0.1:3000: fail closed without UPSTREAM_URL, start, traffic,
# health check, metrics, idle memory, graceful stop (idle, then with a download in flight), and
# deploy/kubernetes.yaml under `podman kube play`. Prints the figures recorded in docs/operations.md.
#
#   sudo scripts/container-smoke.sh            # from the project root; needs podman, runc, debootstrap
#
# Env: IMAGE (default compat-shim), CONTAINERS_CONF (default ../shared/tools/containers.conf when
# present), BASE_IMAGE_SCRIPT (default ../shared/tools/make-node-base-image.sh; skipped if missing and
# the base image exists), SHUTDOWN_TIMEOUT_MS (default 10000). See ../shared/tools/CONTAINERS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE="${IMAGE:-compat-shim}"
NAME="compat-shim-smoke-$$"
FRONT=127.0.0.1:18080
ADMIN=127.0.0.1:19090
SHUTDOWN_TIMEOUT_MS="${SHUTDOWN_TIMEOUT_MS:-10000}"
STOP_WAIT=$(( SHUTDOWN_TIMEOUT_MS / 1000 + 5 ))
LEGACY=(-H 'Service-Client-Version: 0.59.0' -H 'x-api-key: k')
TOOLS="$(pwd)/../shared/tools"
if [ -z "${CONTAINERS_CONF:-}" ] && [ -f "$TOOLS/containers.conf" ]; then export CONTAINERS_CONF="$TOOLS/containers.conf"; fi
BASE_IMAGE_SCRIPT="${BASE_IMAGE_SCRIPT:-$TOOLS/make-node-base-image.sh}"

POD="$NAME-pod"
BASE=docker.io/library/node:24-bookworm-slim
# The stub upstream: /api/health and every other path answer 200 JSON with Service-Version; /debug/bytes?n=N
# streams N bytes. One line without backslashes, double quotes or ampersands, so that it also fits a
# Kubernetes `command` through sed.
STUB_JS=$(cat <<'JS'
require('http').createServer((q,s)=>{s.setHeader('service-version','0.60.0');if(q.url.startsWith('/debug/bytes?n=')){let n=Number(q.url.split('=')[1]);s.writeHead(200,{'content-type':'application/octet-stream','content-length':n});const c=Buffer.alloc(65536,98);const w=()=>{while(n>0){const k=Math.min(n,c.length);n-=k;if(!s.write(c.subarray(0,k)))return s.once('drain',w)}s.end()};return w()}s.setHeader('content-type','application/json');s.end(JSON.stringify({uuid:'f0000000-0000-4000-8000-000000000001'}))}).listen(3000,'127.0.0.1')
JS
)
ms() { date +%s%3N; }
say() { printf '[container-smoke] %s\n' "$*" >&2; }
fail() { say "FAIL: $*"; podman logs "$NAME" 2>/dev/null | tail -20 >&2 || true; exit 1; }
KUBE_YAML=$(mktemp --suffix=.yaml)
cleanup() {
  podman rm -f -t 0 "$NAME" >/dev/null 2>&1 || true
  podman pod rm -f "$POD" >/dev/null 2>&1 || true
  [ -s "$KUBE_YAML" ] && podman kube down "$KUBE_YAML" >/dev/null 2>&1 || true
  rm -f "$KUBE_YAML"
}
trap cleanup EXIT

for tool in podman curl; do command -v "$tool" >/dev/null || fail "$tool is not installed (apt-get install -y podman runc debootstrap curl)"; done

# 1. Base image (local stand-in for node:24-bookworm-slim) and the image itself.
if [ -x "$BASE_IMAGE_SCRIPT" ]; then "$BASE_IMAGE_SCRIPT" 24 2>&1 | tail -1 >&2
elif ! podman image exists docker.io/library/node:24-bookworm-slim; then fail "no base image and no $BASE_IMAGE_SCRIPT"; fi
t=$(ms)
podman build --pull=never --format docker -t "$IMAGE" \
  --build-arg VERSION="$(node -p 'require("./package.json").version' 2>/dev/null || echo 0.0.0)" \
  --build-arg REVISION="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
  --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" . >/dev/null || fail "podman build"
BUILD_MS=$(( $(ms) - t ))
SIZE=$(podman image inspect "$IMAGE" --format '{{.Size}}')
BASE_SIZE=$(podman image inspect docker.io/library/node:24-bookworm-slim --format '{{.Size}}')
[ "$(podman image inspect "$IMAGE" --format '{{.Config.User}}')" = 1000:1000 ] || fail "image does not run as the node user (uid 1000)"
podman run --rm --no-healthcheck --entrypoint sh "$IMAGE" -c 'test ! -e node_modules && test ! -e src && test -s dist/main.js' ||
  fail "the final image holds more than the bundle (node_modules, src/ or the reference backend)"
# Fail closed: without UPSTREAM_URL the image refuses to start (exit 1, one config error line), and
# --demo finds no reference backend in it.
set +e
OUT=$(podman run --rm --no-healthcheck "$IMAGE" 2>&1 | grep -v systemd); CODE=${PIPESTATUS[0]}
set -e
podman run --rm --no-healthcheck "$IMAGE" >/dev/null 2>&1 && fail "started without UPSTREAM_URL"
grep -q '^config error: UPSTREAM_URL: required' <<<"$OUT" || fail "no config error without UPSTREAM_URL: $OUT"
podman run --rm --no-healthcheck "$IMAGE" --demo >/dev/null 2>&1 && fail "--demo started in the production image"
say "fails closed without UPSTREAM_URL; --demo refused (no reference backend in the image)"

# The pod: the stub upstream on 127.0.0.1:3000 beside the shim, as in deploy/kubernetes.yaml.
podman pod create --name "$POD" -p "$FRONT:8080" -p "$ADMIN:9090" >/dev/null
podman run -d --pod "$POD" --name "$NAME-upstream" --read-only --cap-drop ALL --user 1000 "$BASE" node -e "$STUB_JS" \
  >/dev/null 2> >(grep -v 'systemd' >&2) || fail "stub upstream"

# 2. Start hardened as in deploy/ (read-only root, no capabilities, no privilege escalation), no --init:
#    node is PID 1 and handles the signals itself. Start time = `podman run` until /readyz answers 200.
start() {
  t=$(ms)
  podman run -d --pod "$POD" --name "$NAME" --read-only --cap-drop ALL --security-opt no-new-privileges \
    -e UPSTREAM_URL=http://127.0.0.1:3000 -e SHUTDOWN_TIMEOUT_MS="$SHUTDOWN_TIMEOUT_MS" "$IMAGE" \
    > /dev/null 2> >(grep -v 'systemd' >&2) ||
    fail "podman run"
  for _ in $(seq 1 200); do
    curl -sf "http://$ADMIN/readyz" >/dev/null 2>&1 && { START_MS=$(( $(ms) - t )); return; }
    sleep 0.05
  done
  fail "not ready within 10 s"
}
# Stop time = `podman stop` (SIGTERM, SIGKILL after $STOP_WAIT s) until the container has exited.
stop() {
  t=$(ms)
  podman stop -t "$STOP_WAIT" "$NAME" > /dev/null 2> >(grep -v 'systemd' >&2)
  STOP_MS=$(( $(ms) - t ))
  EXIT_CODE=$(podman inspect "$NAME" --format '{{.State.ExitCode}}')
  [ "$EXIT_CODE" = 0 ] || fail "exit code $EXIT_CODE after SIGTERM"
  [ "$STOP_MS" -lt $(( SHUTDOWN_TIMEOUT_MS + 2000 )) ] || fail "stop took $STOP_MS ms (> SHUTDOWN_TIMEOUT_MS)"
  # podman's log file can lag the container's last write by a moment.
  for _ in $(seq 1 20); do podman logs "$NAME" 2>/dev/null | grep -q '"msg":"stopped"' && break; sleep 0.1; done
  podman logs "$NAME" 2>/dev/null | grep -q '"msg":"stopped"' || fail "no 'stopped' log line"
  podman rm "$NAME" > /dev/null 2> >(grep -v 'systemd' >&2)
}

start; START1=$START_MS
say "ready in $START1 ms"

# 3. Traffic through the front door.
code=$(curl -s -o /tmp/smoke-body.$$ -w '%{http_code}' "${LEGACY[@]}" "http://$FRONT/user/me")
[ "$code" = 200 ] || fail "GET /user/me → $code"
grep -q '"uuid"' /tmp/smoke-body.$$ || fail "GET /user/me body: $(cat /tmp/smoke-body.$$)"
rm -f /tmp/smoke-body.$$
# The service version is known from the first response (probed at start).
curl -si "http://$FRONT/user/me" | tr -d '\r' | grep -qi '^service-version: 0.60.0$' || fail "no Service-Version on the 426"
code=$(curl -s -o /dev/null -w '%{http_code}' -H 'Service-Client-Version: 0.59.0' "http://$FRONT/user/me")
[ "$code" = 401 ] || fail "GET /user/me without credentials → $code (want 401)"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$FRONT/api/health")
[ "$code" = 200 ] || fail "GET /api/health → $code"
# The front door forwards /metrics upstream like any path (the stub answers it): never the shim's own.
curl -s "${LEGACY[@]}" "http://$FRONT/metrics" | grep -q 'shim_requests_total' && fail "/metrics is reachable through the front door"

# 4. Health check (HEALTHCHECK, run on demand: there is no systemd to schedule it here) and metrics.
podman healthcheck run "$NAME" >/dev/null || fail "health check"
METRICS=$(curl -s "http://$ADMIN/metrics")
grep -q '^shim_requests_total{route="/user/me",method="GET",status="200"} 1$' <<<"$METRICS" ||
  fail "/metrics does not count the request"
sleep 5 # idle
RSS=$(curl -s "http://$ADMIN/metrics" | awk '/^process_resident_memory_bytes /{printf "%d", $2/1048576}')
[ -n "$RSS" ] || fail "/metrics lacks the process metrics"
CGROUP=$(podman stats --no-stream --format '{{.MemUsage}}' "$NAME" 2>/dev/null | cut -d/ -f1 | tr -d ' ')

# 5. Stop while idle.
stop; STOP_IDLE=$STOP_MS
say "idle stop in $STOP_IDLE ms, exit 0"

# 6. Stop with a download in flight: 48 MiB at 8 MiB/s (about 6 s, far more than socket buffers hold)
#    must arrive whole, and the process must exit 0 once it has, within the shutdown timeout.
start; START2=$START_MS
BYTES=$(( 48 * 1024 * 1024 ))
curl -s --limit-rate 8M -o /tmp/smoke-dl.$$ -w '%{http_code} %{size_download}\n' "${LEGACY[@]}" \
  "http://$FRONT/debug/bytes?n=$BYTES" > /tmp/smoke-dl.$$.out &
CURL=$!
sleep 1
stop; STOP_BUSY=$STOP_MS
wait "$CURL" || fail "download failed during shutdown"
read -r dl_code dl_size < /tmp/smoke-dl.$$.out
rm -f /tmp/smoke-dl.$$ /tmp/smoke-dl.$$.out
[ "$dl_code" = 200 ] && [ "$dl_size" = "$BYTES" ] || fail "in-flight download: status $dl_code, $dl_size of $BYTES bytes"
say "stop with a download in flight in $STOP_BUSY ms, download complete, exit 0"

# 7. deploy/kubernetes.yaml as written (security context, probes' ports, env), with `podman kube play`:
#    the two placeholder images become this image, the backend running the reference backend.
if [ -z "${SKIP_KUBE:-}" ]; then
  sed -e "s#registry.example.com/compat-shim:[^ ]*#localhost/$IMAGE:latest#" \
      -e "s#^\( *\)image: registry.example.com/service-backend:.*#\1image: $BASE\n\1command: [node, -e, \"$STUB_JS\"]#" \
      -e 's/replicas: 2/replicas: 1/' deploy/kubernetes.yaml > "$KUBE_YAML"
  podman kube play "$KUBE_YAML" > /dev/null 2> >(grep -vE 'systemd|syslog' >&2) || fail "podman kube play deploy/kubernetes.yaml"
  SHIM_CTR=$(podman ps --format '{{.Names}}' | grep -- '-compat-shim$' | head -1)
  [ -n "$SHIM_CTR" ] || fail "kube play: no compat-shim container"
  KUBE_STATUS=""
  for _ in $(seq 1 100); do
    KUBE_STATUS=$(podman exec "$SHIM_CTR" node -e "Promise.all([
      fetch('http://127.0.0.1:8080/user/me',{headers:{'service-client-version':'0.59.0','x-api-key':'k'}}).then(r=>r.status),
      fetch('http://127.0.0.1:9090/readyz').then(r=>r.status)]).then(s=>console.log(s.join(' ')),()=>console.log('down'))" 2>/dev/null || true)
    [ "$KUBE_STATUS" = "200 200" ] && break
    sleep 0.1
  done
  [ "$KUBE_STATUS" = "200 200" ] || fail "kube play: /user/me and /readyz → $KUBE_STATUS"
  podman exec "$SHIM_CTR" sh -c 'test "$(id -u)" = 1000 && ! touch /app/x 2>/dev/null' ||
    fail "kube play: not uid 1000 or root filesystem writable"
  podman kube down "$KUBE_YAML" > /dev/null 2>&1 || fail "podman kube down"
  : > "$KUBE_YAML"
  say "deploy/kubernetes.yaml runs under podman kube play (uid 1000, read-only root, ready)"
fi

cat <<REPORT
image            $IMAGE: $(( SIZE / 1000000 )) MB ($(( (SIZE - BASE_SIZE) / 1000000 )) MB above node:24-bookworm-slim), built in $BUILD_MS ms
start            $START1 ms, $START2 ms (podman run → /readyz 200)
memory           $RSS MiB resident (VmRSS of the shim process) and $CGROUP charged to the container's cgroup, idle 5 s after start and a few requests
stop, idle       $STOP_IDLE ms (podman stop → exited, code 0)
stop, in flight  $STOP_BUSY ms (48 MiB download at 8 MiB/s started 1 s before; completed)
REPORT
say "OK"
