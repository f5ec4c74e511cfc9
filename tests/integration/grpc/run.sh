#!/usr/bin/env bash
# The gRPC rate-limit service end to end: the real binary on loopback, driven by @grpc/grpc-js.
#   run.sh install NODE_DIR                        npm ci of package-lock.json into NODE_DIR
#   run.sh test FLOODGATE NODE_DIR STORAGE [REDIS_PORT_FILE]
#   run.sh token-budget FLOODGATE NODE_DIR        examples/envoy/token-budget as Envoy calls it
#   run.sh ai-gateway FLOODGATE NODE_DIR          Envoy AI Gateway's budget on a rule over xDS
# STORAGE is a storage URL, "redis-fixture" for the server whose port REDIS_PORT_FILE holds, or
# "redis-cluster-fixture" for the cluster whose ports (p1,p2,p3) that file holds.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
proto="$here/../../../proto"

if [[ "$1" == install ]]; then
  node_dir="$2"
  mkdir -p "$node_dir"
  cp "$here/package.json" "$here/package-lock.json" "$here/rls_client.js" "$here/tls_client.js" \
    "$here/health_client.js" "$here/token_budget_client.js" "$here/ai_gateway_client.js" "$here/wire_check.js" \
    "$node_dir/"
  (cd "$node_dir" && npm ci --no-audit --no-fund --silent)
  exit 0
fi

floodgate="$2"
node_dir="$3"
if [[ "$1" == ai-gateway ]]; then
  # The script is the control plane too, and starts the binary itself (its log in $work).
  source "$here/../../support/scratch_dir.sh"  # $work, cleaned up on exit
  if ! node "$node_dir/ai_gateway_client.js" "$floodgate" "$proto" "$work"; then
    echo "floodgate log:"; cat "$work/serve.log"; exit 1
  fi
  exit 0
fi
if [[ "$1" == token-budget ]]; then
  # The example's own configuration and rules, on ports of this run's.
  source "$here/../../support/scratch_dir.sh"  # $work, cleaned up on exit
  example="$here/../../../examples/envoy/token-budget"
  "$floodgate" serve --config "$example/floodgate.yaml" --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 \
    --threads 2 --port-file "$work/http.port" --grpc-port-file "$work/grpc.port" 2>"$work/serve.log" &
  echo $! >"$work/pid"
  for _ in $(seq 200); do [[ -s "$work/http.port" ]] && break; sleep 0.05; done
  [[ -s "$work/grpc.port" ]] || { echo "floodgate serve did not start:"; cat "$work/serve.log"; exit 1; }
  if ! node "$node_dir/token_budget_client.js" "$(cat "$work/grpc.port")" "$proto"; then
    echo "floodgate log:"; cat "$work/serve.log"; exit 1
  fi
  kill "$(cat "$work/pid")"
  exit 0
fi
storage="$4"
if [[ "$storage" == redis-fixture ]]; then
  port="$(cat "${5:?REDIS_PORT_FILE}" 2>/dev/null || true)"
  [[ -n "$port" ]] || { echo "the Redis fixture is not running"; exit 1; }
  storage="redis://127.0.0.1:$port?timeout_ms=2000"
elif [[ "$storage" == redis-cluster-fixture ]]; then
  ports="$(cat "${5:?REDIS_PORTS_FILE}" 2>/dev/null || true)"
  [[ -n "$ports" ]] || { echo "the Redis Cluster fixture is not running"; exit 1; }
  storage="redis-cluster://$(sed 's/\([0-9]*\)/127.0.0.1:\1/g' <<<"$ports")?timeout_ms=2000"
fi
source "$here/../../support/scratch_dir.sh"  # $work, cleaned up on exit

cat >"$work/floodgate.yaml" <<YAML
storage: "$storage"
rls:
  config: $here/rules
  listen: 127.0.0.1:0
  response_headers: true
  dynamic_metadata: true
YAML
"$floodgate" serve --config "$work/floodgate.yaml" --listen 127.0.0.1:0 --threads 2 \
  --port-file "$work/http.port" --grpc-port-file "$work/grpc.port" 2>"$work/serve.log" &
echo $! >"$work/pid"
for _ in $(seq 200); do [[ -s "$work/http.port" ]] && break; sleep 0.05; done
if [[ ! -s "$work/grpc.port" ]]; then
  echo "floodgate serve did not start:"; cat "$work/serve.log"; exit 1
fi
echo "storage $storage, gRPC port $(cat "$work/grpc.port")"
if ! node "$node_dir/rls_client.js" "$(cat "$work/grpc.port")" "$(cat "$work/http.port")" "$proto"; then
  echo "floodgate log:"; cat "$work/serve.log"
  exit 1
fi
# Last, as it stops the server: the standard health service, and what SIGTERM does to it.
if ! node "$node_dir/health_client.js" "$(cat "$work/grpc.port")" "$here/health.proto" "$(cat "$work/pid")"; then
  echo "floodgate log:"; cat "$work/serve.log"
  exit 1
fi
