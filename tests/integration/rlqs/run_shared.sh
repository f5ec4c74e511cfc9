#!/usr/bin/env bash
# Two floodgate instances on one store, each with emulated Envoys: together they keep each bucket's
# global limit (rlqs_shared.js).
#   run_shared.sh FLOODGATE NODE_DIR MODE REDIS_DIR [STORAGE]
# MODE: `single`: REDIS_DIR is the redis_single fixture's, one bucket;
#       `cluster`: REDIS_DIR is the redis_cluster fixture's (redis-cluster://), six buckets, whose
#       keys must be on every node;
#       `outage`: a redis-server of this test's own under REDIS_DIR (the redis suite's private
#       servers), stopped after the convergence and started again (docs/rlqs.md, failures).
# STORAGE overrides the URL; `memory` shows the test failing without the sharing (each instance
# then hands out the whole limit).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
proto="$here/../../../proto"
floodgate="$1"
node_dir="$2"
mode="$3"
redis_dir="$4"
fixture="$here/../redis/redis_fixture.sh"
source "$here/../../support/scratch_dir.sh"  # $work, cleaned up on exit
prefix="rlqs-shared-$$:"
export FLOODGATE_ADMIN_TOKEN="rlqs-shared-admin-token-$$"  # /v1/live (the dashboard's data)
export RLQS_BUCKETS=1
case "$mode" in
  single) url="redis://127.0.0.1:$(cat "$redis_dir/port")?prefix=$prefix" ;;
  cluster)
    IFS=, read -r -a cluster_ports <"$redis_dir/ports"
    url="redis-cluster://$(printf '127.0.0.1:%s,' "${cluster_ports[@]}")"
    url="${url%,}?prefix=$prefix"
    export RLQS_BUCKETS=6 ;;
  outage)
    read -r own_port own_dir < <("$fixture" start-server "$redis_dir")
    stop_own() { if [[ -f "$own_dir/redis.pid" ]]; then kill "$(cat "$own_dir/redis.pid")" 2>/dev/null || true; fi; rm -rf "$own_dir"; }
    trap 'stop_own; scratch_cleanup' EXIT
    url="redis://127.0.0.1:$own_port?prefix=$prefix"
    export RLQS_STORE_DOWN="redis-cli -p $own_port shutdown nosave >/dev/null 2>&1 || true"
    export RLQS_STORE_UP="'$fixture' restart '$redis_dir' '$(basename "$own_dir")' >/dev/null" ;;
  *) echo "unknown mode $mode"; exit 2 ;;
esac
storage="${5:-$url}"

mkdir -p "$work/rules"
cat >"$work/rules/edge.yaml" <<'YAML'
domain: edge
buckets:
  - match: {tenant: "*", api: chat}
    limit: 100/second
    burst: 20
YAML
if [[ "$mode" == single ]]; then
  # memcached cannot share a quota between instances: refused at startup, naming the flag.
  if timeout 20 "$floodgate" serve --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --rlqs-config "$work/rules" \
      --storage memcached://127.0.0.1:1 2>"$work/memcached.log"; then
    echo "FAIL: --rlqs-config with memcached started"; exit 1
  fi
  if ! grep -q -- "--rlqs-config needs the memory or a Redis storage" "$work/memcached.log"; then
    echo "FAIL: --rlqs-config with memcached: no clear error:"; cat "$work/memcached.log"; exit 1
  fi
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
if [[ "$mode" == cluster && -z "${5:-}" ]]; then
  # The buckets' grants (prefix{bucket}:q, one slot each) are spread over the masters.
  for p in "${cluster_ports[@]}"; do
    n=$(redis-cli -p "$p" --scan --pattern "$prefix*" | wc -l)
    echo "figure: node 127.0.0.1:$p holds $n of the buckets' grants"
    if [[ "$n" -eq 0 ]]; then echo "FAIL: no bucket's grant on the cluster node $p"; exit 1; fi
  done
fi
