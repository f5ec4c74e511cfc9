#!/usr/bin/env bash
# floodgate's memcached storage beside Python `limits` (pymemcache) on one private memcached,
# interleaved, REPS times; prints every measurement as JSON and a table of medians.
#   bench/memcached/run.sh BUILD_DIR [REPS=3] [SECONDS=2] [KEYS=100000]
# BUILD_DIR holds bench/memcached/floodgate_memcached_benchmark (a release build). The memcached
# (-m 1024, loopback, a free port) is started and stopped by PID.
# Python `limits` is found as in bench/peers (lib.sh): LIMITS_SRC, a source tree holding limits/,
# else the interpreter's own (Debian: python3-limits, with python3-pymemcache). py_limits_memcached.py
# needs SlidingWindowCounterRateLimiter, which Debian 12's limits 2.8.0 lacks: with that one,
# floodgate is measured alone and the note says why.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build=${1:?BUILD_DIR}
reps=${2:-3}
seconds=${3:-2}
keys=${4:-100000}
bench="$build/bench/memcached/floodgate_memcached_benchmark"
limits_src=${LIMITS_SRC:-}
py=${PEERS_PYTHON:-/usr/bin/python3}
[ -x "$bench" ] || { echo "no $bench: build the release preset" >&2; exit 2; }

# Which `limits` (path, version), and whether it can run py_limits_memcached.py.
with_python=1
if ! desc=$(LIMITS_SRC="$limits_src" "$py" "$here/../peers/py_limits.py" --describe); then
  echo "Python limits: not found (LIMITS_SRC or apt-get install python3-limits); floodgate alone" >&2
  with_python=0
else
  echo "$desc"
  if ! echo "$desc" | "$py" -c 'import json, sys; sys.exit("sliding_window_counter" not in json.load(sys.stdin)["strategies"])'; then
    echo "note: this limits has no SlidingWindowCounterRateLimiter, which py_limits_memcached.py needs;" \
      "set LIMITS_SRC to a newer limits source tree to measure it; floodgate alone" >&2
    with_python=0
  elif ! "$py" -c 'import pymemcache' 2>/dev/null; then
    echo "note: no pymemcache for $py (apt-get install python3-pymemcache); floodgate alone" >&2
    with_python=0
  fi
fi

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
memcached -l 127.0.0.1 -p "$port" -U 0 -m 1024 -u "$(id -un)" </dev/null >/dev/null 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do (exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$port") && break; sleep 0.05; done

out=$(mktemp)
for rep in $(seq 1 "$reps"); do
  timeout 300 "$bench" --port "$port" --seconds "$seconds" --keys "$keys" --run "$rep" | tee -a "$out"
  [ "$with_python" = 0 ] ||
    LIMITS_SRC="$limits_src" timeout 300 "$py" "$here/py_limits_memcached.py" "$port" "$seconds" "$keys" "$rep" | tee -a "$out"
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = {}
for r in rows:
    groups.setdefault((r["peer"], r["algorithm"], r["mode"], r["batch"]), []).append(r)
print(f"\nmedians of {max(len(v) for v in groups.values())} runs (memcached on loopback, one client process, one thread)")
print(f"| peer | algorithm | mode | decisions/s | p50 µs | p99 µs |")
print(f"|---|---|---|---:|---:|---:|")
for (peer, alg, mode, batch), v in sorted(groups.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
    med = lambda f: statistics.median(x[f] for x in v)
    label = f"{mode} ({batch})" if mode == "batched" else mode
    per = " per batch" if mode == "batched" else ""
    print(f"| {peer} | {alg} | {label} | {med('ops_per_s'):,.0f} | {med('p50_us'):.0f}{per} | {med('p99_us'):.0f}{per} |")
PY
rm -f "$out"
