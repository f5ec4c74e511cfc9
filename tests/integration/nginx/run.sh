#!/usr/bin/env bash
# nginx (Debian's) with auth_request in front of a static upstream, floodgate behind it, all on
# loopback: 30 requests against a 10/minute policy give exactly 10 upstream responses and 20 × 429
# carrying Retry-After and the RateLimit headers. Usage: run.sh /path/to/floodgate
set -euo pipefail
floodgate="$1"
here="$(cd "$(dirname "$0")" && pwd)"
prefix="$(mktemp -d)"
cleanup() {
  [[ -f "$prefix/floodgate.pid" ]] && kill "$(cat "$prefix/floodgate.pid")" 2>/dev/null || true
  [[ -f "$prefix/nginx.pid" ]] && kill "$(cat "$prefix/nginx.pid")" 2>/dev/null || true
  sleep 0.2
  rm -rf "$prefix"
}
trap cleanup EXIT

source "$here/lib.sh"

"$floodgate" serve --config "$examples/floodgate.yaml" --listen 127.0.0.1:0 \
  --port-file "$prefix/floodgate.port" --threads 1 2>"$prefix/floodgate.log" &
echo $! >"$prefix/floodgate.pid"
for _ in $(seq 100); do [[ -s "$prefix/floodgate.port" ]] && break; sleep 0.05; done
floodgate_port="$(cat "$prefix/floodgate.port")"
if ! start_nginx "$examples/nginx.conf" -e "s|@FLOODGATE_PORT@|$floodgate_port|g"; then
  echo "0 passed, 1 failed"; exit 1
fi

upstream=0; limited=0; with_headers=0
for i in $(seq 30); do
  # A failed transfer is reported below as an unexpected response, never a silent exit.
  out="$(curl -s -S -i --max-time 10 "http://127.0.0.1:$nginx_port/page" 2>&1 || true)"
  status="$(printf '%s' "$out" | head -1 | awk '{print $2}')"
  if [[ "$status" == 200 ]] && grep -q "hello from the upstream" <<<"$out"; then
    upstream=$((upstream + 1))
  elif [[ "$status" == 429 ]]; then
    limited=$((limited + 1))
    if grep -qi '^Retry-After: [1-9]' <<<"$out" && grep -qi '^RateLimit: "web";r=0;t=' <<<"$out" \
       && grep -qi '^RateLimit-Policy: "web";q=10;w=60' <<<"$out" && grep -qi '^X-RateLimit-Remaining: 0' <<<"$out"; then
      with_headers=$((with_headers + 1))
    else
      echo "a 429 without the expected headers:"; echo "$out"
    fi
  else
    echo "unexpected response $i:"; echo "$out"
  fi
done
echo "nginx: $upstream upstream responses, $limited × 429 ($with_headers with Retry-After and RateLimit headers)"
if [[ "$upstream" == 10 && "$limited" == 20 && "$with_headers" == 20 ]]; then
  echo "1 passed, 0 failed"
else
  echo "nginx error log:"; cat "$prefix/error.log" || true
  echo "floodgate log:"; cat "$prefix/floodgate.log" || true
  echo "0 passed, 1 failed"
  exit 1
fi
