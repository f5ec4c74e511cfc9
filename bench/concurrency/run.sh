#!/usr/bin/env bash
# Concurrency limits under load: 64 clients × 1,000 lease attempts against one key of a policy
# "8 concurrent for 10 seconds", on the memory store (1 `floodgate serve`), a Redis (2 instances
# sharing it, clients split between them) and a 3-master Redis Cluster (2 instances). Each run
# prints one JSON line: max_outstanding (the most leases out at once as /v1/stats showed them,
# sampled in a tight loop), max_outstanding_client (leases between their 200 and their release, as
# the clients counted them), ops_per_s (HTTP requests, hits and releases, per second). Then, per
# storage, a client holding every slot of a "4 concurrent for 2 seconds" policy is SIGKILLed and
# the time until the slots are free again is printed ("kill": true). Exits non-zero if a run saw
# more leases out than the limit. Loopback only; starts and stops its own servers.
#   bench/concurrency/run.sh build/release/floodgate      [CLUSTER=0 to skip the cluster]
# (build/release/bench/lease_load, the load's client, is built by `--target lease_load`.)
set -euo pipefail
floodgate="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
here="$(cd "$(dirname "$0")" && pwd)"
fixture="$here/../../tests/integration/redis/redis_fixture.sh"
client=("$here/client.py")
# The load: build/…/bench/lease_load (C++, a thread per client, cheap) beside the floodgate binary,
# else client.py (Python asyncio, about 3 times the CPU per request: the rates are then lower).
lease_load="$(dirname "$floodgate")/bench/lease_load"
if [[ -x "$lease_load" ]]; then load=("$lease_load"); else load=(python3 "$here/client.py" run); fi
limit=8
ttl=10
kill_limit=4
kill_ttl=2
work="$(mktemp -d)"
pids=()
# shellcheck disable=SC2317  # run by the trap
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  local d
  for d in redis cluster; do
    if [[ -d "$work/$d" ]]; then "$fixture" stop "$work/$d" >/dev/null 2>&1 || true; fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/floodgate.yaml" <<YAML
log_level: warn
policies:
  - {name: slots, strategy: concurrency, limit: $limit concurrent for $ttl seconds}
  - {name: short, strategy: concurrency, limit: $kill_limit concurrent for $kill_ttl seconds}
YAML

# serve STORAGE_URL NAME: starts one instance; appends its port to $ports
ports=""
serve() {
  "$floodgate" serve --config "$work/floodgate.yaml" --storage "$1" --listen 127.0.0.1:0 --threads 2 \
    --port-file "$work/$2.port" 2>"$work/$2.log" &
  pids+=($!)
  local _
  for _ in $(seq 200); do [[ -s "$work/$2.port" ]] && break; sleep 0.05; done
  [[ -s "$work/$2.port" ]] || { echo "floodgate serve ($2) did not start:" >&2; cat "$work/$2.log" >&2; exit 1; }
  ports="${ports:+$ports,}$(cat "$work/$2.port")"
}
stop_servers() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
  ports=""
}

status=0
# bench STORAGE: the load run and the kill measurement against the instances in $ports
bench() {
  local line server_pids f
  server_pids="$(IFS=,; echo "${pids[*]}")"
  for f in "$work"/redis/single/redis.pid "$work"/cluster/node*/redis.pid; do
    if [[ -f "$f" ]]; then server_pids+=",$(cat "$f")"; fi
  done
  line="$("${load[@]}" --storage "$1" --ports "$ports" --policy slots --key "load-$1" \
    --limit "$limit" --clients 64 --requests 1000 --server-pids "$server_pids")"
  echo "$line"
  if python3 -c 'import json, sys; r = json.loads(sys.argv[1]); sys.exit(r["max_outstanding"] > r["limit"] or r["max_outstanding_client"] > r["limit"])' "$line"; then :; else
    echo "FAILED: $1 had more leases outstanding than the limit" >&2
    status=1
  fi
  python3 "${client[@]}" kill --storage "$1" --port "${ports%%,*}" --policy short --key "kill-$1" \
    --limit "$kill_limit" --ttl "$kill_ttl"
}

serve memory memory
bench memory
stop_servers

"$fixture" start-single "$work/redis" >/dev/null
redis_port="$(cat "$work/redis/port")"
serve "redis://127.0.0.1:$redis_port" redis1
serve "redis://127.0.0.1:$redis_port" redis2
bench redis
stop_servers

if [[ "${CLUSTER:-1}" != 0 ]]; then
  if "$fixture" start-cluster "$work/cluster" >/dev/null; then
    cluster_ports="$(cat "$work/cluster/ports")"
    url="redis-cluster://127.0.0.1:${cluster_ports//,/,127.0.0.1:}"
    serve "$url" cluster1
    serve "$url" cluster2
    bench redis-cluster
    stop_servers
  else
    echo "skipped: the Redis Cluster did not start" >&2
  fi
fi
exit "$status"
