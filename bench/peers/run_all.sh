#!/usr/bin/env bash
# The peers and floodgate side by side: runs setup.sh (idempotent), then every benchmark REPS
# times (default 3), interleaved by repetition, and writes $PEERS_RESULTS (default
# $WORK/results, $WORK = /tmp/floodgate-peers)/<date>.jsonl plus <date>.summary.md (medians),
# which it also prints. From the root of a clone:
#
#   bench/peers/setup.sh                                # once: apt (as root), npm into $WORK, javac
#   REPS=3 bench/peers/run_all.sh inmem                 # sections: inmem, redis, http (default: all)
#
# floodgate's rows (in process on MemoryStorage, and on the private Redis) come from
# floodgate/fg_inmem.cpp, a program built against an installed floodgate (find_package; see
# floodgate/CMakeLists.txt). run_all.sh takes the first of:
#   FG_BENCH=/path/to/fg_inmem      a program already built, used as is;
#   FG_PREFIX=/an/install/prefix    built into $WORK/fg-bench against that prefix;
#   build/release of this clone     (cmake --preset release && cmake --build --preset release)
#                                   installed into $WORK/fg-prefix, then built as above;
# and without any of them measures the peers alone (a note in the results says so). By hand:
#   cmake --install build/release --prefix /tmp/fg
#   cmake -S bench/peers/floodgate -B /tmp/fg-bench -DCMAKE_PREFIX_PATH=/tmp/fg -DCMAKE_BUILD_TYPE=Release
#   cmake --build /tmp/fg-bench
#   REPS=3 FG_BENCH=/tmp/fg-bench/fg_inmem bench/peers/run_all.sh inmem redis
# The http section measures nginx's limit_req alone; floodgate's HTTP side is bench/http/compare_nginx.sh.
#
#   env: REPS (3), BENCH_SECONDS (2: time cap of one in-process measurement),
#        WRK_SECONDS (10), CEIL_SECONDS (3), NGINX_WORKERS (1), REDIS_PORT (6390),
#        HTTP_PORT_BASE (18080), LIMITS_SRC (Python `limits`, see lib.sh), PEERS_WORK ($WORK),
#        PEERS_RESULTS, FG_BENCH / FG_PREFIX (above),
#        QUIET_BUSY (15) / QUIET_MAX_WAIT (60): before each benchmark process, wait until the
#        machine is less than QUIET_BUSY % busy (other users' load skews the figures)
# Every process is wrapped in `timeout`; each measurement is capped well under 20 s.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$HERE"
source ./lib.sh
SECTIONS=("$@")
[ ${#SECTIONS[@]} -gt 0 ] || SECTIONS=(inmem redis http)
for s in "${SECTIONS[@]}"; do
  case "$s" in inmem|redis|http) ;; *) echo "unknown section $s (inmem, redis, http)" >&2; exit 2 ;; esac
done
want() { [[ " ${SECTIONS[*]} " == *" $1 "* ]]; }

bash ./setup.sh || { echo "setup failed" >&2; exit 1; }

RESULTS="${PEERS_RESULTS:-$WORK/results}"
mkdir -p "$RESULTS" "$RUN_DIR"
STAMP="$(date +%Y-%m-%d)"
[ -e "$RESULTS/$STAMP.jsonl" ] && STAMP="$(date +%Y-%m-%d-%H%M%S)"
OUT="$RESULTS/$STAMP.jsonl"
SUM="$RESULTS/$STAMP.summary.md"
LOG="$RUN_DIR/run_all-$STAMP.log"
: > "$LOG"
GUAVA_VER="$(dpkg-query -W -f='${Version}' libguava-java 2>/dev/null || echo unknown)"

"$PY" - "$REPS" "$BENCH_SECONDS" "${SECTIONS[*]}" >> "$OUT" <<'PYEOF'
import json, os, platform, sys, time
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
print(json.dumps({"bench": "meta", "what": "machine", "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
  "nproc": os.cpu_count(), "cpu": cpu, "kernel": platform.release(),
  "load1": float(open("/proc/loadavg").read().split()[0]),
  "reps": int(sys.argv[1]), "bench_seconds": float(sys.argv[2]), "sections": sys.argv[3]}))
PYEOF

# meta KEY=VALUE...: one "meta" line in the results (printed at the top of the summary)
meta() {
  "$PY" -c 'import json, sys; print(json.dumps(dict([("bench", "meta")] + [a.split("=", 1) for a in sys.argv[1:]])))' \
    "$@" >> "$OUT"
}

# Python `limits`: which one (LIMITS_SRC or the interpreter's), its version, the strategies it has.
PY_STRATEGIES_ALL=""
if want inmem || want redis; then
  desc="$("$PY" ./py_limits.py --describe)" || { echo "Python limits: see the error above" >&2; exit 1; }
  echo "$desc" >> "$OUT"
  PY_STRATEGIES_ALL="$(echo "$desc" | "$PY" -c 'import json, sys; print(json.load(sys.stdin)["strategies"].replace(",", " "))')"
  echo "$desc" | "$PY" -c 'import json, sys; d = json.load(sys.stdin)
print("[run_all] python limits %s from %s; skipped: %s" % (d["version"], d["path"], d["skipped"]))' >&2
fi

# floodgate's program (see the header): FG_BENCH, else built from FG_PREFIX or build/release.
FG_NOTE=""
build_fg() {
  local prefix="${FG_PREFIX:-}" from
  if [ -n "$prefix" ]; then
    from="the install prefix $prefix (FG_PREFIX)"
  elif [ -f "$REPO_DIR/build/release/CMakeCache.txt" ]; then
    prefix="$WORK/fg-prefix"
    from="$REPO_DIR/build/release ($(git -C "$REPO_DIR" describe --always --dirty 2>/dev/null || echo 'no git'))"
    echo "[run_all] cmake --install build/release --prefix $prefix" >&2
    if ! timeout 300 cmake --install "$REPO_DIR/build/release" --prefix "$prefix" >>"$LOG" 2>&1; then
      FG_NOTE="cmake --install build/release failed (is it built? cmake --build --preset release; see $LOG)"
      return 1
    fi
  else
    FG_NOTE="no FG_BENCH, no FG_PREFIX, no build/release in this clone"
    return 1
  fi
  local dir="$WORK/fg-bench"
  echo "[run_all] building fg_inmem against $from into $dir" >&2
  # -U floodgate_DIR: find the package again, in case the prefix changed since the last build
  if ! timeout 300 cmake -S "$HERE/floodgate" -B "$dir" -U floodgate_DIR -DCMAKE_PREFIX_PATH="$prefix" \
         -DCMAKE_BUILD_TYPE=Release >>"$LOG" 2>&1; then
    FG_NOTE="configuring fg_inmem against $prefix failed (see $LOG)"
    return 1
  fi
  # find_package falls back to the system's paths: refuse a floodgate found outside the prefix
  local found
  found="$(sed -n 's/^floodgate_DIR:PATH=//p' "$dir/CMakeCache.txt")"
  case "$(realpath -m "$found")/" in
    "$(realpath -m "$prefix")"/*) ;;
    *) FG_NOTE="$prefix holds no floodgate package (CMake found $found instead)"; return 1 ;;
  esac
  if ! timeout 900 cmake --build "$dir" >>"$LOG" 2>&1; then
    FG_NOTE="building fg_inmem against $prefix failed (see $LOG)"
    return 1
  fi
  FG_BENCH="$dir/fg_inmem"
  FG_NOTE="built from $from ($found)"
}
if want inmem || want redis; then
  if [ -n "${FG_BENCH:-}" ]; then
    [ -x "$FG_BENCH" ] || { echo "FG_BENCH=$FG_BENCH is not an executable" >&2; exit 1; }
    FG_NOTE="FG_BENCH"
  else
    FG_BENCH=""
    build_fg || FG_BENCH=""
  fi
  meta what=floodgate "program=${FG_BENCH:-none}" "note=$FG_NOTE"
  echo "[run_all] floodgate: ${FG_BENCH:-not measured} ($FG_NOTE)" >&2
fi

# r REP TIMEOUT cmd... : run one bounded benchmark process, tag its JSON lines, append to OUT
r() {
  local rep="$1" tmo="$2"; shift 2
  wait_quiet
  echo "[run_all] rep $rep (machine ${PRE_BUSY}% busy before): $*" >&2
  timeout "$tmo" "$@" 2>>"$LOG" | "$PY" ./tag.py "$rep" "$PRE_BUSY" >> "$OUT" 2>>"$LOG"
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || echo "[run_all]   exit $rc (see $LOG)" >&2
}

REDIS_PID=""
cleanup() { stop_redis; }
trap cleanup EXIT
if want redis; then start_redis || exit 1; fi

for rep in $(seq 1 "$REPS"); do
  if want inmem; then
    for s in $PY_STRATEGIES_ALL; do
      PY_STRATEGIES=$s r "$rep" 60 "$PY" ./py_limits.py inmem "$rep"
    done
    for p in rate-limiter-flexible limiter bottleneck; do
      NODE_DIR="$NODE_DIR" NODE_ONLY=$p r "$rep" 60 node ./node_peers.js inmem "$rep"
    done
    r "$rep" 60 java -Dguava.version="$GUAVA_VER" -cp "$GUAVA_JAR:$JAVA_DIR" GuavaBench "$BENCH_SECONDS" "$rep"
    r "$rep" 60 java -Dguava.version="$GUAVA_VER" -cp "$GUAVA_JAR:$JAVA_DIR" GuavaBench "$BENCH_SECONDS" "$rep" threads
    if [ -n "$FG_BENCH" ]; then r "$rep" 120 "$FG_BENCH" "$BENCH_SECONDS" "$rep"; fi
  fi
  if want redis; then
    for s in $PY_STRATEGIES_ALL; do
      flush_redis
      PY_STRATEGIES=$s r "$rep" 60 "$PY" ./py_limits.py redis "$rep"
    done
    for v in seq c64 c64ap; do
      flush_redis
      NODE_REDIS_VARIANTS=$v r "$rep" 60 node ./node_peers.js redis "$rep"
    done
    if [ -n "$FG_BENCH" ]; then flush_redis; r "$rep" 120 "$FG_BENCH" "$BENCH_SECONDS" "$rep" redis "$REDIS_PORT"; fi
    for c in incr tb_lua gcra_lua; do
      CEIL_CASES=$c r "$rep" 120 bash ./redis_ceiling.sh "$rep"
    done
  fi
  if want http; then
    r "$rep" 150 bash ./nginx_ceiling.sh "$rep"
  fi
done
stop_redis

"$PY" ./summarize.py "$OUT" > "$SUM"
echo "[run_all] results: $OUT ($(grep -vc '"bench": "meta"' "$OUT") measurements), summary: $SUM, log: $LOG" >&2
cat "$SUM"
