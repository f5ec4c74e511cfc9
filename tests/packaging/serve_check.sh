#!/usr/bin/env bash
# Starts the service as the packages start it, checks that it answers, stops it with SIGTERM.
#   serve_check.sh [--chroot DIR] [--user UID:GID] [--env NAME=VALUE]… --port PORT
#                  [--hit POLICY] [--json DOMAIN KEY VALUE] [--reload] -- COMMAND ARGS…
# COMMAND runs with only the given environment (and PATH), as UID:GID with no supplementary
# groups and no new privileges, umask 0077 (the unit's UMask), inside DIR when given (chroot: the
# image's root file system). Checks: /healthz and /readyz answer 200 on 127.0.0.1:PORT; with
# --hit, POST /v1/hit for POLICY answers 200; with --json, envoyproxy's POST /json answers OK for
# one descriptor; with --reload, SIGHUP (the unit's ExecReload) reloads the configuration and it
# still answers; then SIGTERM stops it with exit code 0 within 15 s (the unit's TimeoutStopSec).
# Run it where PORT is free: tests/packaging/in_netns.py gives it a network namespace of its own.
set -euo pipefail
root="" user="65534:65534" port="" hit="" json=() reload="" envs=(PATH=/usr/bin:/bin)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --chroot) root="$2"; shift 2 ;;
    --user) user="$2"; shift 2 ;;
    --env) envs+=("$2"); shift 2 ;;
    --port) port="$2"; shift 2 ;;
    --hit) hit="$2"; shift 2 ;;
    --json) json=("$2" "$3" "$4"); shift 4 ;;
    --reload) reload=1; shift ;;
    --) shift; break ;;
    *) echo "serve_check.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n "$port" && $# -gt 0 ]] || { echo "serve_check.sh: --port and a command are required" >&2; exit 2; }
log="$(mktemp)"
if [[ -n "$root" ]]; then
  launch=("$(command -v chroot)" --userspec="$user" "$root")
else
  launch=("$(command -v setpriv)" --reuid="${user%%:*}" --regid="${user##*:}" --clear-groups --no-new-privs)
fi
umask 0077
env -i "${envs[@]}" "${launch[@]}" "$@" > "$log" 2>&1 &
pid=$!
umask 0022
trap 'kill -KILL $pid 2>/dev/null || true; rm -f "$log"' EXIT
fail() { echo "serve_check: FAIL $*" >&2; sed 's/^/  | /' "$log" >&2; exit 1; }

base="http://127.0.0.1:$port"
for _ in $(seq 100); do
  curl -fsS -m 1 -o /dev/null "$base/healthz" 2>/dev/null && break
  kill -0 $pid 2>/dev/null || fail "exited before answering: $*"
  sleep 0.1
done
code() { curl -sS -m 2 -o /dev/null -w '%{http_code}' "$@" || true; }
[[ "$(code "$base/healthz")" == 200 ]] || fail "/healthz on port $port"
[[ "$(code "$base/readyz")" == 200 ]] || fail "/readyz on port $port"
if [[ -n "$hit" ]]; then
  got="$(code -X POST "$base/v1/hit" -d "{\"policy\": \"$hit\", \"key\": \"package-check\"}")"
  [[ "$got" == 200 ]] || fail "POST /v1/hit for policy $hit: $got"
fi
if ((${#json[@]})); then
  body="{\"domain\": \"${json[0]}\", \"descriptors\": [{\"entries\": [{\"key\": \"${json[1]}\", \"value\": \"${json[2]}\"}]}]}"
  answer="$(curl -sS -m 2 -X POST "$base/json" -d "$body" || true)"
  [[ "$answer" == *'"overallCode":"OK"'* ]] || fail "POST /json: $answer"
fi
if [[ -n "$reload" ]]; then
  kill -HUP $pid
  for _ in $(seq 30); do grep -q 'reloaded the configuration (SIGHUP)' "$log" && break; sleep 0.1; done
  grep -q 'reloaded the configuration (SIGHUP)' "$log" || fail "no reload after SIGHUP"
  [[ "$(code "$base/healthz")" == 200 ]] || fail "/healthz after SIGHUP"
fi
who="$(ps -o user= -p $pid)"
start=$(date +%s%N)
kill -TERM $pid
rc=0
for _ in $(seq 150); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
kill -0 $pid 2>/dev/null && fail "still running 15 s after SIGTERM"
wait $pid || rc=$?
[[ $rc == 0 ]] || fail "exit code $rc after SIGTERM"
echo "serve_check: ok as $who ($user) on port $port: /healthz /readyz${hit:+ /v1/hit}${json:+ /json}${reload:+ SIGHUP},"\
     "stopped by SIGTERM in $(( ($(date +%s%N) - start) / 1000000 )) ms: $*"
