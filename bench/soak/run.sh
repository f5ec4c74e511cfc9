#!/usr/bin/env bash
# Soak: policies that come and go. Starts `floodgate serve` (memory store, gRPC rules)
# and drives it with policy_soak.js: distinct limit overrides over gRPC, distinct inline limits over
# HTTP, reloads that change every limit, then an idle wait; prints RSS (start, peak, end),
# decisions/s and the slowest call per phase, and what the service's housekeeping gave back
# (policies dropped, trims and the longest trim, from /metrics).
#   [SOAK_UNIT=second] bench/soak/run.sh FLOODGATE NODE_DIR [OVERRIDES] [INLINE] [RELOADS] [IDLE_SECONDS]
# NODE_DIR holds @grpc/grpc-js (tests/integration/grpc/run.sh install NODE_DIR makes it).
# Defaults: 100000 100000 1000 20. Use a release build on an otherwise idle machine:
#   bench/soak/run.sh build/release/floodgate /tmp/node
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
floodgate="$(realpath "$1")"
node_dir="$(realpath "$2")"
source "$here/../../tests/support/scratch_dir.sh"  # $work, cleaned up on exit
mkdir "$work/rules"
node "$here/policy_soak.js" write-rules "$work/rules/soak.yaml" 0
cat >"$work/floodgate.yaml" <<YAML
storage: memory
policies:
  - name: api
    limit: 100/second
rls:
  config: $work/rules
  listen: 127.0.0.1:0
YAML
"$floodgate" serve --config "$work/floodgate.yaml" --listen 127.0.0.1:0 --threads 2 \
  --port-file "$work/http.port" --grpc-port-file "$work/grpc.port" 2>"$work/serve.log" &
echo $! >"$work/pid"
for _ in $(seq 200); do [[ -s "$work/grpc.port" ]] && break; sleep 0.05; done
[[ -s "$work/grpc.port" ]] || { cat "$work/serve.log"; exit 1; }
NODE_PATH="$node_dir/node_modules" node "$here/policy_soak.js" run "$(cat "$work/grpc.port")" \
  "$(cat "$work/http.port")" "$here/../../proto" "$(cat "$work/pid")" "$work/rules/soak.yaml" \
  "${3:-100000}" "${4:-100000}" "${5:-1000}" "${6:-20}"
