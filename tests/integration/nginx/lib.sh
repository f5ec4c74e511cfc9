# Starting Debian's nginx on loopback for the nginx tests (sourced by run.sh, simulate.sh and fail_open.sh).
# Needs: $prefix (a scratch directory). Sets nginx_bin and examples (examples/nginx) now, and
# nginx_port and upstream_port when start_nginx succeeds.
nginx_bin="$(command -v nginx || echo /usr/sbin/nginx)"
examples="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../../examples/nginx" && pwd)"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null \
  || echo $((20000 + RANDOM % 20000)); }

# start_nginx TEMPLATE [SED_ARGS…]: fills @PREFIX@, @NGINX_PORT@, @UPSTREAM_PORT@ (and whatever the
# extra sed arguments fill) into TEMPLATE and starts nginx with it. nginx takes fixed ports from its
# config: pick free ones, and if another process took one between the pick and nginx's bind (other
# tests start servers in parallel), pick again. nginx is up when its upstream server answers with
# our text and its front server answers at all. Returns 1 after five failed attempts.
start_nginx() {
  local template="$1"; shift
  local attempt
  for attempt in 1 2 3 4 5; do
    nginx_port="$(free_port)"
    upstream_port="$(free_port)"
    while [[ "$upstream_port" == "$nginx_port" ]]; do upstream_port="$(free_port)"; done
    sed -e "s|@PREFIX@|$prefix|g" -e "s|@NGINX_PORT@|$nginx_port|g" -e "s|@UPSTREAM_PORT@|$upstream_port|g" \
        "$@" "$template" >"$prefix/nginx.conf"
    : >"$prefix/error.log"
    "$nginx_bin" -p "$prefix" -c "$prefix/nginx.conf" 2>>"$prefix/nginx.stderr" &
    local pid=$!
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      if curl -s --max-time 2 "http://127.0.0.1:$upstream_port/" 2>/dev/null | grep -q "hello from the upstream" \
         && curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$nginx_port/_floodgate" 2>/dev/null; then
        return 0
      fi
      sleep 0.05
    done
    echo "nginx did not come up on ports $nginx_port/$upstream_port (attempt $attempt):"
    cat "$prefix/error.log" "$prefix/nginx.stderr" 2>/dev/null || true
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  return 1
}
