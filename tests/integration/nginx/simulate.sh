#!/usr/bin/env bash
# `floodgate simulate` on an access log written by a real nginx (Debian's): requests with known API
# keys go through nginx, which logs them in "combined" plus "$http_x_api_key"; the log (plain and
# gzip'd) is simulated keyed by that header, and every row's counts must equal those of a replay
# of the same requests (a JSONL trace the test writes as it sends them) and the expected ones.
# Usage: simulate.sh /path/to/floodgate
set -euo pipefail
floodgate="$1"
here="$(cd "$(dirname "$0")" && pwd)"
prefix="$(mktemp -d)"
cleanup() {
  [[ -f "$prefix/nginx.pid" ]] && kill "$(cat "$prefix/nginx.pid")" 2>/dev/null || true
  sleep 0.2
  rm -rf "$prefix"
}
trap cleanup EXIT
source "$here/lib.sh"
if ! start_nginx "$here/access_log.conf"; then echo "0 passed, 1 failed"; exit 1; fi

# 12 requests with key-a, 3 with key-b, 7 with key-c and 2 without a key ("-" in the log), in an
# interleaved order; against 5/hour every strategy allows 5 + 3 + 5 + 2 = 15 and blocks 7 + 2 = 9.
: >"$prefix/replay.jsonl"
order="a a b a c a c a b c a c a a c a a b c - a c - a"
for k in $order; do
  now="$(date +%s.%N)"
  if [[ "$k" == - ]]; then
    curl -s -o /dev/null --max-time 10 "http://127.0.0.1:$nginx_port/page"
  else
    curl -s -o /dev/null --max-time 10 -H "X-Api-Key: key-$k" "http://127.0.0.1:$nginx_port/page"
  fi
  key="$([[ "$k" == - ]] && echo - || echo "key-$k")"
  printf '{"t": %s, "key": "%s"}\n' "$now" "$key" >>"$prefix/replay.jsonl"
done
kill "$(cat "$prefix/nginx.pid")"; rm -f "$prefix/nginx.pid"; sleep 0.2   # flushes the log
echo "nginx wrote $(wc -l <"$prefix/access.log") log lines; the first:"; head -1 "$prefix/access.log"
gzip -k "$prefix/access.log"

layout='$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_api_key"'
table() { grep -E '^[a-z-]+ +[0-9]+ +[0-9]+ ' | awk '{print $1, $2, $3, $6}'; }
"$floodgate" simulate --limit 5/hour --traffic "$prefix/access.log" --format combined \
  --log-format "$layout" --key '$http_x_api_key' >"$prefix/log.out"
"$floodgate" simulate --limit 5/hour --traffic "$prefix/access.log.gz" \
  --log-format "$layout" --key '$http_x_api_key' >"$prefix/gz.out"
"$floodgate" simulate --limit 5/hour --traffic "$prefix/replay.jsonl" >"$prefix/replay.out"
cat "$prefix/log.out"
failed=0
if [[ "$(wc -l <"$prefix/access.log")" != 24 ]]; then echo "FAIL: 24 log lines expected"; failed=1; fi
if [[ "$(table <"$prefix/log.out")" != "$(table <"$prefix/replay.out")" ]]; then
  echo "FAIL: the log's table differs from the replay's:"; cat "$prefix/replay.out"; failed=1
fi
if [[ "$(table <"$prefix/gz.out")" != "$(table <"$prefix/log.out")" ]]; then
  echo "FAIL: the gzip'd log gives another table:"; cat "$prefix/gz.out"; failed=1
fi
rows="$(table <"$prefix/log.out")"
if [[ "$(wc -l <<<"$rows")" != 7 ]] || grep -qv ' 15 9 2$' <<<"$rows"; then
  echo "FAIL: every strategy should allow 15, block 9, and block 2 keys (strategy allowed blocked keys):"
  echo "$rows"; failed=1
fi
if ! grep -q '^24 requests over .*, 4 keys$' "$prefix/log.out"; then echo "FAIL: 24 requests from 4 keys expected"; failed=1; fi
if [[ "$failed" == 0 ]]; then echo "1 passed, 0 failed"; else echo "0 passed, 1 failed"; exit 1; fi
