#!/usr/bin/env bash
# Starts and stops the memcached servers of the integration tests, on loopback:
#   memcached_fixture.sh start DIR [memcached args…]  one server on a free port, state in DIR;
#                                                     prints and writes DIR/port
#   memcached_fixture.sh start-server DIR [args…]     the same in a new DIR/server-XXXXXX, for a
#                                                     test that kills it; prints "PORT SERVERDIR"
#   memcached_fixture.sh restart SERVERDIR            starts it again, same port and arguments
#   memcached_fixture.sh stop DIR                     stops every server under DIR, removes DIR
# The port: the first free one from a base derived from DIR (two build trees do not collide); a
# server that cannot bind exits, and the next port is tried.
set -euo pipefail

cmd=${1:?usage: memcached_fixture.sh start|start-server|restart|stop DIR [args…]}
dir=${2:?DIR}
shift 2

port_in_use() { (exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1"); }

# answers PORT: our memcached replies to "version".
answers() {
  local reply
  reply=$(exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1" && printf 'version\r\n' >&3 &&
          timeout 1 head -c 7 <&3) || return 1
  [ "$reply" = "VERSION" ]
}

# run SERVERDIR PORT ARGS…: starts memcached in the background; 0 when it answers on PORT.
run() {
  local node_dir=$1 port=$2
  shift 2
  mkdir -p "$node_dir"
  printf '%s\n' "$@" >"$node_dir/args"
  echo "$port" >"$node_dir/port"
  # The server outlives this script: it must not keep the descriptors it would inherit open (a
  # `flock` around ctest would stay held by it until it is stopped).
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
    done
    exec setsid memcached -l 127.0.0.1 -p "$port" -U 0 -u "$(id -un)" "$@"
  ) </dev/null >>"$node_dir/memcached.log" 2>&1 &
  local pid=$!
  echo "$pid" >"$node_dir/pid"
  local i
  for i in $(seq 1 200); do
    if ! kill -0 "$pid" 2>/dev/null; then return 1; fi  # exited: the port was taken
    if answers "$port"; then return 0; fi
    sleep 0.02
  done
  stop_node "$node_dir"
  return 1
}

stop_node() {
  local node_dir=$1
  [ -f "$node_dir/pid" ] || return 0
  local pid
  pid=$(cat "$node_dir/pid")
  kill -CONT "$pid" 2>/dev/null || true  # a test may have left it stopped
  kill "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$node_dir/pid"
}

base_port() {
  local sum
  sum=$(printf '%s' "$dir" | cksum | cut -d' ' -f1)
  echo $((40000 + (sum % 1000) * 20))
}

# start_in NODE_DIR FIRST_PORT ARGS…
start_in() {
  local node_dir=$1 p=$2
  shift 2
  local tries
  for tries in $(seq 1 30); do
    while port_in_use "$p"; do p=$((p + 1)); done
    if run "$node_dir" "$p" "$@"; then
      return 0
    fi
    p=$((p + 1))
  done
  echo "could not start memcached" >&2
  return 1
}

stop_all() {
  [ -d "$dir" ] || return 0
  local node
  for node in "$dir" "$dir"/*/; do
    [ -d "$node" ] && stop_node "${node%/}"
  done
  rm -rf "$dir"
}

case "$cmd" in
  start)
    stop_all
    mkdir -p "$dir"
    start_in "$dir" "$(base_port)" "$@"
    echo "memcached on 127.0.0.1:$(cat "$dir/port")"
    ;;
  start-server)
    mkdir -p "$dir"
    node_dir=$(mktemp -d "$dir/server-XXXXXX")
    start_in "$node_dir" $(($(base_port) + 1 + RANDOM % 19)) "$@"
    echo "$(cat "$node_dir/port") $node_dir"
    ;;
  restart)
    mapfile -t args <"$dir/args"
    run "$dir" "$(cat "$dir/port")" "${args[@]}"
    ;;
  stop) stop_all ;;
  *) echo "unknown command $cmd" >&2; exit 2 ;;
esac
