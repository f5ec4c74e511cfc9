#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build the release binary,
# and run the service on the in-memory store: `floodgate serve` on 127.0.0.1:8080 with the example
# configuration (examples/floodgate.yaml). Extra arguments go to `floodgate serve`
# (e.g. --listen 0.0.0.0:9000, --config my.yaml). Stop it with Ctrl-C (SIGINT) or SIGTERM.
# It prints the admin token (FLOODGATE_ADMIN_TOKEN, generated unless set) and the dashboard's
# address with it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target floodgate_cli >/dev/null
# The admin endpoints (DELETE /v1/keys, the dashboard's /v1/simulate and /v1/live) need a bearer
# token: yours from FLOODGATE_ADMIN_TOKEN, or a fresh random one for this run.
if [[ -z "${FLOODGATE_ADMIN_TOKEN:-}" ]]; then
  FLOODGATE_ADMIN_TOKEN="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
fi
export FLOODGATE_ADMIN_TOKEN
# The address the service will listen on: --listen (the last one wins), else the listen: of the
# configuration file (the last --config, else the example's), else the default.
config=examples/floodgate.yaml
listen=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --listen) listen="${args[i + 1]:-}" ;;
    --listen=*) listen="${args[i]#--listen=}" ;;
    -c | --config) config="${args[i + 1]:-}" ;;
    --config=*) config="${args[i]#--config=}" ;;
  esac
done
if [[ -z "$listen" && -r "$config" ]]; then
  listen="$(sed -nE 's/^listen:[[:space:]]*"?([^"#[:space:]]+)"?.*/\1/p' "$config" | tail -n1)"
fi
listen="${listen:-127.0.0.1:8080}"
port="${listen##*:}"
host="${listen%:*}"
case "$host" in 0.0.0.0 | "" | "[::]" | "*") host=127.0.0.1 ;; esac
echo "floodgate serve --config examples/floodgate.yaml $*" >&2
echo "admin token: $FLOODGATE_ADMIN_TOKEN (FLOODGATE_ADMIN_TOKEN)" >&2
echo "dashboard: http://$host:$port/#token=$FLOODGATE_ADMIN_TOKEN" >&2
echo "try: curl -i -X POST $host:$port/v1/hit -d '{\"policy\": \"api\", \"key\": \"user-42\"}'" >&2
exec build/release/floodgate serve --config examples/floodgate.yaml "$@"
