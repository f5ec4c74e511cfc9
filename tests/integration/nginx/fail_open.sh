#!/usr/bin/env bash
# The nginx recipes of examples/nginx/nginx.conf when floodgate does not answer: as written, the
# request fails closed (nginx answers 500); with the fail-open recipe its comments give, it goes
# through to the application — and with floodgate back, denials are still 429.
#   Usage: fail_open.sh /path/to/floodgate
set -euo pipefail
floodgate="$1"
here="$(cd "$(dirname "$0")" && pwd)"
prefix="$(mktemp -d)"
stop_nginx() {
  [[ -f "$prefix/nginx.pid" ]] && kill "$(cat "$prefix/nginx.pid")" 2>/dev/null || true
  for _ in $(seq 50); do [[ -f "$prefix/nginx.pid" ]] || break; sleep 0.05; done
  rm -f "$prefix/nginx.pid"
}
cleanup() {
  [[ -f "$prefix/floodgate.pid" ]] && kill "$(cat "$prefix/floodgate.pid")" 2>/dev/null || true
  stop_nginx
  sleep 0.2
  rm -rf "$prefix"
}
trap cleanup EXIT
source "$here/lib.sh"

status_of() { curl -s -o "$prefix/body" -w '%{http_code}' --max-time 10 "http://127.0.0.1:$nginx_port/page" || true; }
passed=0; failed=0
check() {  # check WHAT CONDITION…
  local what="$1"; shift
  if "$@"; then passed=$((passed + 1)); echo "ok: $what"; else failed=$((failed + 1)); echo "FAIL: $what"; fi
}
# The recipe exactly as the comments of nginx.conf give it, put where they say.
recipe=(-e 's|^\( *\)error_page 403 = @rate_limited;|&\n\1error_page 500 502 503 504 = @fail_open;|'
        -e 's|^\( *\)location @rate_limited {|\1location @fail_open {\n\1    proxy_pass http://127.0.0.1:@UPSTREAM_PORT@;\n\1}\n&|')
sed "${recipe[@]}" "$examples/nginx.conf" >"$prefix/with_recipe.conf"
grep -q 'location @fail_open' "$prefix/with_recipe.conf" || { echo "the recipe was not inserted"; echo "0 passed, 1 failed"; exit 1; }
down_port="$(free_port)"  # nothing listens there: floodgate is down

start_nginx "$examples/nginx.conf" -e "s|@FLOODGATE_PORT@|$down_port|g" || { echo "0 passed, 1 failed"; exit 1; }
code="$(status_of)"
check "floodgate down, nginx.conf as written: 500 (fails closed; got $code)" test "$code" = 500
stop_nginx

start_nginx "$prefix/with_recipe.conf" -e "s|@FLOODGATE_PORT@|$down_port|g" || { echo "0 passed, 1 failed"; exit 1; }
code="$(status_of)"
check "floodgate down, with the fail-open recipe: 200 from the application (got $code)" \
  bash -c "test '$code' = 200 && grep -q 'hello from the upstream' '$prefix/body'"
stop_nginx

"$floodgate" serve --config "$examples/floodgate.yaml" --listen 127.0.0.1:0 \
  --port-file "$prefix/floodgate.port" --threads 1 2>"$prefix/floodgate.log" &
echo $! >"$prefix/floodgate.pid"
for _ in $(seq 100); do [[ -s "$prefix/floodgate.port" ]] && break; sleep 0.05; done
start_nginx "$prefix/with_recipe.conf" -e "s|@FLOODGATE_PORT@|$(cat "$prefix/floodgate.port")|g" \
  || { echo "0 passed, 1 failed"; exit 1; }
ok=0; limited=0
for _ in $(seq 15); do
  case "$(status_of)" in 200) ok=$((ok + 1)) ;; 429) limited=$((limited + 1)) ;; esac
done
check "floodgate up, with the recipe: 10 through and 5 × 429 of 15 (got $ok and $limited)" \
  test "$ok" = 10 -a "$limited" = 5

echo "$passed passed, $failed failed"
((failed == 0)) || { cat "$prefix/error.log" 2>/dev/null || true; exit 1; }
