# Common settings for the peer benchmarks (sourced, not run).
PEERS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_DIR="$(cd "$PEERS_DIR/../.." && pwd)"           # the clone these scripts belong to
WORK="${PEERS_WORK:-${TMPDIR:-/tmp}/floodgate-peers}"  # node_modules, classes, builds, runtime dirs (outside the clone)
NODE_DIR="$WORK/node"
JAVA_DIR="$WORK/java"
RUN_DIR="$WORK/run"                                 # redis/nginx runtime dirs, logs, pid files
GUAVA_JAR="${GUAVA_JAR:-/usr/share/java/guava.jar}"
PY="${PEERS_PYTHON:-/usr/bin/python3}"              # Debian's python (python3-redis etc.)
# Python `limits`: LIMITS_SRC, a source tree holding limits/ (for instance an unpacked wheel of
# another release: unzip limits-X.Y.Z-py3-none-any.whl -d DIR; LIMITS_SRC=DIR), is put first on
# sys.path; unset, the interpreter's own `limits` is used (Debian: python3-limits, which setup.sh
# installs). py_limits.py --describe prints which one that is.
LIMITS_SRC="${LIMITS_SRC:-}"
REDIS_PORT="${REDIS_PORT:-6390}"                    # allowed: 6390-6399
HTTP_PORT_BASE="${HTTP_PORT_BASE:-18080}"           # allowed: 18080-18099
REPS="${REPS:-3}"                                   # repetitions of every measurement
BENCH_SECONDS="${BENCH_SECONDS:-2}"                 # time cap of one in-process measurement
export PEERS_DIR REPO_DIR WORK NODE_DIR JAVA_DIR RUN_DIR GUAVA_JAR PY LIMITS_SRC REDIS_PORT \
  HTTP_PORT_BASE REPS BENCH_SECONDS

# start_redis: start a private redis-server on 127.0.0.1:$REDIS_PORT (no persistence);
# sets REDIS_PID. Refuses to touch a port that is already in use.
start_redis() {
  mkdir -p "$RUN_DIR/redis"
  if redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
    echo "port $REDIS_PORT already serves redis (not ours?); refusing" >&2; return 1
  fi
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
    --dir "$RUN_DIR/redis" --logfile "$RUN_DIR/redis/redis.log" --daemonize no \
    --protected-mode yes --maxmemory 2gb --maxmemory-policy noeviction &
  REDIS_PID=$!
  echo "$REDIS_PID" > "$RUN_DIR/redis/pid"
  for _ in $(seq 50); do
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "redis did not start" >&2; return 1
}
stop_redis() {
  if [ -n "${REDIS_PID:-}" ] && kill -0 "$REDIS_PID" 2>/dev/null; then
    kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true
  fi
  REDIS_PID=""
}
flush_redis() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" FLUSHALL >/dev/null; }

# cpu_busy_pct [SECONDS]: share (0-100) of all CPUs that was busy (not idle/iowait) over
# the next SECONDS (default 1), from /proc/stat. Includes our own processes.
cpu_busy_pct() {
  local s="${1:-1}" a b
  a="$(head -1 /proc/stat)"; sleep "$s"; b="$(head -1 /proc/stat)"
  awk -v a="$a" -v b="$b" 'BEGIN {
    n = split(a, x, " "); split(b, y, " "); tot = 0; idle = 0
    for (i = 2; i <= n; i++) { d = y[i] - x[i]; tot += d; if (i == 5 || i == 6) idle += d }
    if (tot <= 0) { print 0; exit } printf "%d\n", 100 * (tot - idle) / tot }'
}
# wait_quiet: before a measurement, wait (at most QUIET_MAX_WAIT s, default 60) until the
# machine is quiet (busy < QUIET_BUSY %, default 15, over 1 s); sets PRE_BUSY to the last reading.
wait_quiet() {
  local t0=$SECONDS
  while :; do
    PRE_BUSY="$(cpu_busy_pct 1)"
    [ "$PRE_BUSY" -lt "${QUIET_BUSY:-15}" ] && return 0
    if [ $((SECONDS - t0)) -ge "${QUIET_MAX_WAIT:-60}" ]; then
      echo "[quiet] machine still ${PRE_BUSY}% busy after ${QUIET_MAX_WAIT:-60}s; measuring anyway" >&2
      return 0
    fi
    sleep 2
  done
}
