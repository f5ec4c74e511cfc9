# The two servers of the benchmarks of GET /v1/auth beside nginx (compare_nginx.sh,
# instructions.sh), doing the same decisions: sourced.
#   free_port                                 → a free loopback port
#   write_floodgate_conf PREFIX               → PREFIX/floodgate.yaml: policies "allow" (GCRA,
#   1000000000/second: never reached) and "deny" (1/hour), keyed by X-Real-IP
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
write_floodgate_conf() {
  cat >"$1/floodgate.yaml" <<YAML
log_level: warn
policies:
  - {name: allow, strategy: gcra, limit: 1000000000/second, key: {header: X-Real-IP}}
  - {name: deny, strategy: gcra, limit: 1/hour, key: {header: X-Real-IP}}
YAML
}
#   write_nginx_conf PREFIX PORT WORKERS [single]  → PREFIX/nginx.conf; /allow never reaches its
#   limit, /deny allows 1 a minute (429 past it); "single": one process in the foreground (no
#   master), for a profiler.
write_nginx_conf() {
  local prefix="$1" port="$2" workers="$3" single="${4:-}" head="" listen_opts=" reuseport"
  if [[ "$single" == single ]]; then head=$'master_process off;\ndaemon off;'; listen_opts=""; fi
  cat >"$prefix/nginx.conf" <<NGINX
worker_processes $workers;
$head
pid $prefix/nginx.pid;
error_log $prefix/error.log error;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $prefix/cb; proxy_temp_path $prefix/p; fastcgi_temp_path $prefix/f;
  uwsgi_temp_path $prefix/u; scgi_temp_path $prefix/s;
  limit_req_zone \$binary_remote_addr zone=allow:10m rate=100000000r/s;
  limit_req_zone \$binary_remote_addr zone=deny:10m rate=1r/m;
  limit_req_status 429;
  server {
    listen 127.0.0.1:$port$listen_opts;
    location /allow { limit_req zone=allow burst=100000000 nodelay; return 204; }
    location /deny { limit_req zone=deny nodelay; return 204; }
  }
}
NGINX
}
