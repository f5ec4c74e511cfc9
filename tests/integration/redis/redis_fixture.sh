#!/usr/bin/env bash
# Starts or stops the Redis servers of the integration tests, on loopback, with data under DIR:
#   redis_fixture.sh start-single DIR     one server;            writes DIR/port
#   redis_fixture.sh start-cluster DIR    3 masters, a cluster;  writes DIR/ports (p1,p2,p3)
#   redis_fixture.sh stop DIR             stops every server started under DIR and removes DIR
#   redis_fixture.sh start-server DIR     one server on a free port, for a test that kills it
#   redis_fixture.sh start-tls DIR        certificates made now with openssl under DIR/tls (a CA,
#                                         the server's for 127.0.0.1/localhost, a client's, and a CA
#                                         nobody trusts), and two TLS servers: DIR/port (plain, for
#                                         set-up) + DIR/tls_port (client certificate optional, ACL
#                                         user floodgate/s3cret), DIR/mtls_port (certificate required)
# Ports: the first free ones from a base derived from DIR, so that two build trees (and two
# engineers) do not collide; a port another process takes between the check and the bind is
# skipped (we check that the server answering is ours by its working directory).
set -euo pipefail

cmd=${1:?usage: redis_fixture.sh start-single|start-cluster|start-server|stop DIR}
dir=${2:?DIR}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

base_port() {
  local sum
  sum=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
  echo $((20000 + (sum % 2000) * 10))
}

# start_one NODE_DIR PORT [extra redis-server args…]: returns 0 when our server answers on PORT.
start_one() {
  local node_dir=$1 port=$2
  shift 2
  mkdir -p "$node_dir"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$node_dir" --daemonize yes \
    --pidfile "$node_dir/redis.pid" --logfile "$node_dir/redis.log" --save '' \
    --appendonly no --protected-mode no "$@" >/dev/null 2>&1 || return 1
  local i
  for i in $(seq 1 100); do
    if [ "$(redis-cli -p "$port" config get dir 2>/dev/null | sed -n 2p)" = "$(cd "$node_dir" && pwd -P)" ]; then
      echo "$port" >"$node_dir/port"
      return 0
    fi
    if [ -f "$node_dir/redis.pid" ] && ! kill -0 "$(cat "$node_dir/redis.pid")" 2>/dev/null; then
      break  # it exited: the port was taken
    fi
    sleep 0.05
  done
  stop_node "$node_dir"
  return 1
}

stop_node() {
  local node_dir=$1
  if [ -f "$node_dir/redis.pid" ]; then
    local pid
    pid=$(cat "$node_dir/redis.pid")
    kill "$pid" 2>/dev/null || true
    local i
    for i in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$node_dir/redis.pid"
  fi
}

# next_port FROM: the first port ≥ FROM that nobody listens on.
next_port() {
  local p=$1
  while port_in_use "$p"; do p=$((p + 1)); done
  echo "$p"
}

start_single() {
  local p
  p=$(base_port)
  mkdir -p "$dir"
  local tries
  for tries in $(seq 1 20); do
    p=$(next_port "$p")
    if start_one "$dir/single" "$p"; then
      echo "$p" >"$dir/port"
      echo "redis on 127.0.0.1:$p"
      return 0
    fi
    p=$((p + 1))
  done
  echo "could not start redis-server" >&2
  return 1
}

start_server() {  # like start_single, into a new DIR/server-XXXXXX; prints "PORT DIR"
  local p node_dir
  p=$(( $(base_port) + 100 + RANDOM % 400 ))
  mkdir -p "$dir"
  local tries
  for tries in $(seq 1 20); do
    p=$(next_port "$p")
    node_dir=$(mktemp -d "$dir/server-XXXXXX")
    if start_one "$node_dir" "$p" "${@:3}"; then
      echo "$p $node_dir"
      return 0
    fi
    rm -rf "$node_dir"
    p=$((p + 1))
  done
  return 1
}

start_cluster() {
  local p ports=()
  p=$(( $(base_port) + 3 ))
  mkdir -p "$dir"
  local i tries
  for i in 1 2 3; do
    for tries in $(seq 1 20); do
      p=$(next_port "$p")
      if start_one "$dir/node$i" "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
           --cluster-node-timeout 5000; then
        ports+=("$p")
        p=$((p + 1))
        break
      fi
      p=$((p + 1))
    done
  done
  if [ ${#ports[@]} -ne 3 ]; then
    echo "could not start 3 cluster nodes" >&2
    return 1
  fi
  redis-cli --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" \
    "127.0.0.1:${ports[2]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1
  for i in $(seq 1 200); do
    local ok=0 q
    for q in "${ports[@]}"; do
      redis-cli -p "$q" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && ok=$((ok + 1))
    done
    if [ "$ok" -eq 3 ]; then
      echo "${ports[0]},${ports[1]},${ports[2]}" >"$dir/ports"
      echo "redis cluster on 127.0.0.1:${ports[0]},${ports[1]},${ports[2]}"
      return 0
    fi
    sleep 0.1
  done
  echo "the cluster did not become ok" >&2
  cat "$dir/create.log" >&2
  return 1
}

# make_certs: a CA, the server's certificate, a client's and an untrusted CA, under DIR/tls.
make_certs() {
  "$(dirname "$0")/../../support/make_test_certs.sh" "$dir/tls" >"$dir/certs.log" 2>&1 || {
    cat "$dir/certs.log" >&2
    return 1
  }
}

# start_tls_node NAME AUTH_CLIENTS: a plain port (set-up, the liveness check) and a TLS port.
start_tls_node() {
  local name=$1 auth=$2 t p q tries
  t=$(cd "$dir/tls" && pwd -P)
  p=$(( $(base_port) + 50 ))
  for tries in $(seq 1 20); do
    p=$(next_port "$p")
    q=$(next_port $((p + 1)))
    if start_one "$dir/$name" "$p" --tls-port "$q" --tls-cert-file "$t/server.crt" \
         --tls-key-file "$t/server.key" --tls-ca-cert-file "$t/ca.crt" --tls-auth-clients "$auth" \
         --user floodgate on '>s3cret' '~*' '&*' '+@all'; then
      echo "$p $q"
      return 0
    fi
    p=$((q + 1))
  done
  return 1
}

start_tls() {
  mkdir -p "$dir"
  make_certs
  local a b
  a=$(start_tls_node node-tls optional) || { echo "could not start redis-server with TLS" >&2; return 1; }
  b=$(start_tls_node node-mtls yes) || { echo "could not start redis-server with TLS" >&2; return 1; }
  echo "${a% *}" >"$dir/port"
  echo "${a#* }" >"$dir/tls_port"
  echo "${b#* }" >"$dir/mtls_port"
  echo "redis with TLS on 127.0.0.1:${a#* } (plain ${a% *}), requiring client certificates on ${b#* }"
}

stop_all() {
  [ -d "$dir" ] || return 0
  local node
  for node in "$dir"/*/; do
    [ -d "$node" ] && stop_node "${node%/}"
  done
  rm -rf "$dir"
}

case "$cmd" in
  start-single) stop_all; start_single ;;
  start-cluster) stop_all; start_cluster ;;
  start-server) start_server "$@" ;;
  start-tls) stop_all; start_tls ;;
  stop) stop_all ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
