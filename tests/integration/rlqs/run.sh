#!/usr/bin/env bash
# Envoy's Rate Limit Quota Service end to end: the real binary on loopback, driven by a fleet of
# emulated Envoys (@grpc/grpc-js, installed by the grpc suite's fixture).
#   run.sh FLOODGATE NODE_DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
proto="$here/../../../proto"
floodgate="$1"
node_dir="$2"
source "$here/../../support/scratch_dir.sh"  # $work, cleaned up on exit

mkdir -p "$work/rules"
cat >"$work/rules/edge.yaml" <<'YAML'
domain: edge
buckets:
  - match: {tenant: "*", api: chat}
    limit: 100/second
    burst: 20
  - match: {api: admin}
    action: deny
  - match: {}
    action: allow
YAML
"$floodgate" serve --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --rlqs-config "$work/rules" --threads 2 \
  --port-file "$work/http.port" --grpc-port-file "$work/grpc.port" 2>"$work/serve.log" &
echo $! >"$work/pid"
for _ in $(seq 200); do [[ -s "$work/http.port" ]] && break; sleep 0.05; done
if [[ ! -s "$work/grpc.port" ]]; then
  echo "floodgate serve did not start:"; cat "$work/serve.log"; exit 1
fi
if ! NODE_PATH="$node_dir/node_modules" node "$here/rlqs_client.js" "$(cat "$work/grpc.port")" \
    "$(cat "$work/http.port")" "$proto" "$work/rules/edge.yaml" "$(cat "$work/pid")"; then
  echo "floodgate log:"; cat "$work/serve.log"
  exit 1
fi
