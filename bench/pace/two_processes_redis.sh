#!/usr/bin/env bash
# Two `floodgate pace` processes sharing one key on a scratch Redis: together they emit at the
# limit. Prints the combined pacing figures (gaps.js).
#   bench/pace/two_processes_redis.sh build/release/floodgate [RATE=20] [LINES_EACH=100]
set -euo pipefail
floodgate="$1"; rate="${2:-20}"; lines="${3:-100}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
redis-server --port "$port" --bind 127.0.0.1 --save '' --daemonize yes --dir "$work" --logfile "$work/redis.log"
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
url="redis://127.0.0.1:$port"
{
  (sleep 1; seq "$lines" | sed 's/^/a/') | "$floodgate" pace --limit "$rate/second" --storage "$url" --key shared &
  (sleep 1; seq "$lines" | sed 's/^/b/') | "$floodgate" pace --limit "$rate/second" --storage "$url" --key shared &
  wait
} | node "$here/gaps.js" "$rate"
