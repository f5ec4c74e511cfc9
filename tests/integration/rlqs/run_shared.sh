#!/usr/bin/env bash
# Two floodgate instances on one Redis (the redis_single fixture), each with emulated Envoys:
# together they keep one bucket's global limit (rlqs_shared.js).
#   run_shared.sh FLOODGATE NODE_DIR REDIS_DIR [STORAGE]
# STORAGE defaults to redis://127.0.0.1:<the fixture's port>; `memory` shows the test failing
# without the sharing (each instance then hands out the whole limit).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
proto="$here/../../../proto"
floodgate="$1"
node_dir="$2"
redis_dir="$3"
source "$here/../../support/scratch_dir.sh"  # $work, cleaned up on exit
storage="${4:-redis://127.0.0.1:$(cat "$redis_dir/port")?prefix=rlqs-shared-$$:}"

mkdir -p "$work/rules"
cat >"$work/rules/edge.yaml" <<'YAML'
domain: edge
buckets:
  - match: {tenant: "*", api: chat}
    limit: 100/second
    burst: 20
YAML
# memcached cannot share a quota between instances: refused at startup, naming the flag.
if timeout 20 "$floodgate" serve --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --rlqs-config "$work/rules" \
    --storage memcached://127.0.0.1:1 2>"$work/memcached.log"; then
  echo "FAIL: --rlqs-config with memcached started"; exit 1
fi
if ! grep -q -- "--rlqs-config needs the memory or a Redis storage" "$work/memcached.log"; then
  echo "FAIL: --rlqs-config with memcached: no clear error:"; cat "$work/memcached.log"; exit 1
fi
for name in a b; do
  "$floodgate" serve --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --rlqs-config "$work/rules" --threads 2 \
    --storage "$storage" --port-file "$work/$name.http" --grpc-port-file "$work/$name.grpc" \
    2>"$work/$name.log" &
  echo $! >"$work/$name.pid"
done
for name in a b; do
  for _ in $(seq 200); do [[ -s "$work/$name.grpc" ]] && break; sleep 0.05; done
  if [[ ! -s "$work/$name.grpc" ]]; then
    echo "floodgate serve ($name) did not start:"; cat "$work/$name.log"; exit 1
  fi
done
if ! NODE_PATH="$node_dir/node_modules" node "$here/rlqs_shared.js" "$(cat "$work/a.grpc")" "$(cat "$work/b.grpc")" \
    "$(cat "$work/a.http")" "$(cat "$work/b.http")" "$proto"; then
  for name in a b; do echo "floodgate ($name) log:"; cat "$work/$name.log"; done
  exit 1
fi
