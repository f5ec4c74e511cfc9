#!/usr/bin/env bash
# Starts or stops the Redis servers of the integration tests, on loopback, with data under DIR:
#   redis_fixture.sh start-single DIR     one server;            writes DIR/port
#   redis_fixture.sh start-cluster DIR    3 masters, a cluster;  writes DIR/ports (p1,p2,p3)
#   redis_fixture.sh start-cluster DIR P1 P2 P3   the same on these ports (a test that starts first)
#   redis_fixture.sh stop DIR             stops every server started under DIR and removes DIR
#   redis_fixture.sh start-server DIR     one server on a free port, for a test that kills it
#   redis_fixture.sh start-tls DIR        certificates made now with openssl under DIR/tls (a CA,
#                                         the server's for 127.0.0.1/localhost, a client's, and a CA
#                                         nobody trusts), and two TLS servers: DIR/port (plain, for
#                                         set-up) + DIR/tls_port (client certificate optional, ACL
#                                         user floodgate/s3cret), DIR/mtls_port (certificate required)
#   redis_fixture.sh start-tls-cluster DIR  certificates as start-tls, and 3 masters of a cluster whose
#                                         bus and clients speak TLS (tls-cluster yes): DIR/ports
#                                         (plain, for set-up) and DIR/tls_ports
#   redis_fixture.sh start-sentinel DIR   a master (DIR/data1), its replica (DIR/data2) and three
#                                         sentinels watching them as "mymaster" (quorum 2, fast
#                                         timeouts); writes DIR/ports (data1 data2) and
#                                         DIR/sentinel_ports (s1,s2,s3)
#   redis_fixture.sh restart DIR NODE     starts DIR/NODE again with its first arguments (after kill -9)
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
  printf '%s\n' "$port" "$@" >"$node_dir/args"  # for `restart`
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
      # A daemonized server is reparented to pid 1, which may be slow to reap it: a zombie is gone.
      [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" = Z ] && break
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
  local p ports=() want=("$@")
  p=$(( $(base_port) + 3 ))
  mkdir -p "$dir"
  local i tries
  for i in 1 2 3; do
    if [ ${#want[@]} -eq 3 ]; then
      start_one "$dir/node$i" "${want[$((i - 1))]}" --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 5000 && ports+=("${want[$((i - 1))]}")
      continue
    fi
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

# start_sentinel NODE_DIR PORT MASTER_PORT: a sentinel with a config file of its own (it rewrites
# it), fast timeouts (SENTINEL DEBUG shortens the periods Redis 7 otherwise fixes at seconds).
start_sentinel() {
  local node_dir=$1 port=$2 master=$3 i
  mkdir -p "$node_dir"
  cat >"$node_dir/sentinel.conf" <<CONF
port $port
bind 127.0.0.1
daemonize yes
pidfile $node_dir/redis.pid
logfile $node_dir/redis.log
dir $node_dir
sentinel monitor mymaster 127.0.0.1 $master 2
sentinel down-after-milliseconds mymaster 400
sentinel failover-timeout mymaster 1000
sentinel parallel-syncs mymaster 1
CONF
  redis-sentinel "$node_dir/sentinel.conf" >/dev/null 2>&1 || return 1
  for i in $(seq 1 100); do
    if redis-cli -p "$port" sentinel get-master-addr-by-name mymaster 2>/dev/null | grep -q "^$master\$"; then
      # tilt-period: a sentinel whose timer was held up more than 2 s (a loaded machine, a
      # paused VM) enters TILT and takes no action — it does not turn a deposed master into a
      # replica — for 30 s by default; all three here share the machine, so one stall held up all.
      redis-cli -p "$port" sentinel debug info-period 200 publish-period 200 ask-period 200 \
        ping-period 100 election-timeout 500 tilt-period 1000 >/dev/null
      echo "$port" >"$node_dir/port"
      return 0
    fi
    sleep 0.05
  done
  stop_node "$node_dir"
  return 1
}

start_sentinel_set() {
  local p ports=() m r i
  p=$(( $(base_port) + 5 ))
  mkdir -p "$dir"
  for i in 1 2; do
    p=$(next_port "$p")
    if [ "$i" = 1 ]; then
      start_one "$dir/data1" "$p" --shutdown-timeout 0 || { echo "could not start the master" >&2; return 1; }
      m=$p
    else
      start_one "$dir/data2" "$p" --shutdown-timeout 0 --replicaof 127.0.0.1 "$m" || { echo "could not start the replica" >&2; return 1; }
      r=$p
    fi
    p=$((p + 1))
  done
  for i in $(seq 1 100); do
    redis-cli -p "$r" info replication | grep -q 'master_link_status:up' && break
    sleep 0.05
  done
  for i in 1 2 3; do
    p=$(next_port "$p")
    start_sentinel "$dir/sentinel$i" "$p" "$m" || { echo "could not start sentinel $i" >&2; return 1; }
    ports+=("$p")
    p=$((p + 1))
  done
  # Every sentinel knows the replica and its peers before a test asks for a failover.
  for i in $(seq 1 200); do
    local ok=0 q
    for q in "${ports[@]}"; do
      local info
      info=$(redis-cli -p "$q" sentinel master mymaster 2>/dev/null | tr '\n' ' ')
      [[ "$info" =~ num-slaves\ 1\ .*num-other-sentinels\ 2\  ]] && ok=$((ok + 1))
    done
    if [ "$ok" -eq 3 ]; then
      echo "$m $r" >"$dir/ports"
      echo "${ports[0]},${ports[1]},${ports[2]}" >"$dir/sentinel_ports"
      echo "redis master on $m, replica on $r, sentinels on ${ports[*]}"
      return 0
    fi
    sleep 0.1
  done
  echo "the sentinels did not find each other and the replica" >&2
  return 1
}

restart_node() {
  local node_dir=$dir/${3:?NODE} port
  mapfile -t args <"$node_dir/args"
  port=${args[0]}
  start_one "$node_dir" "$port" "${args[@]:1}"
}

start_tls_cluster() {
  mkdir -p "$dir"
  make_certs
  local t p q i tries ports=() tls_ports=()
  t=$(cd "$dir/tls" && pwd -P)
  p=$(( $(base_port) + 60 ))
  for i in 1 2 3; do
    for tries in $(seq 1 20); do
      p=$(next_port "$p")
      q=$(next_port $((p + 1)))
      if start_one "$dir/node$i" "$p" --tls-port "$q" --tls-cert-file "$t/server.crt" \
           --tls-key-file "$t/server.key" --tls-ca-cert-file "$t/ca.crt" --tls-auth-clients optional \
           --tls-cluster yes --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout 5000; then
        ports+=("$p")
        tls_ports+=("$q")
        p=$((q + 1))
        break
      fi
      p=$((q + 1))
    done
  done
  [ ${#ports[@]} -eq 3 ] || { echo "could not start 3 TLS cluster nodes" >&2; return 1; }
  redis-cli --cluster create "127.0.0.1:${ports[0]}" "127.0.0.1:${ports[1]}" "127.0.0.1:${ports[2]}" \
    --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1
  for i in $(seq 1 200); do
    local ok=0 n
    for n in "${ports[@]}"; do
      redis-cli -p "$n" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && ok=$((ok + 1))
    done
    if [ "$ok" -eq 3 ]; then
      echo "${ports[0]},${ports[1]},${ports[2]}" >"$dir/ports"
      echo "${tls_ports[0]},${tls_ports[1]},${tls_ports[2]}" >"$dir/tls_ports"
      echo "redis cluster over TLS on 127.0.0.1:${tls_ports[0]},${tls_ports[1]},${tls_ports[2]}"
      return 0
    fi
    sleep 0.1
  done
  echo "the TLS cluster did not become ok" >&2
  cat "$dir/create.log" >&2
  return 1
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
  start-cluster) stop_all; start_cluster "${@:3}" ;;
  start-server) start_server "$@" ;;
  start-tls) stop_all; start_tls ;;
  start-sentinel) stop_all; start_sentinel_set ;;
  start-tls-cluster) stop_all; start_tls_cluster ;;
  restart) restart_node "$@" ;;
  stop) stop_all ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
