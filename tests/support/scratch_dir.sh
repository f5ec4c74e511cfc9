# Sourced by the test and benchmark scripts that start `floodgate serve`: a scratch directory in
# $work, and on exit every process whose PID is in $work/pid or $work/*.pid is stopped (SIGTERM)
# and the directory removed.
work="$(mktemp -d)"
scratch_cleanup() {
  local p
  for p in "$work"/pid "$work"/*.pid; do [[ -f "$p" ]] && kill "$(cat "$p")" 2>/dev/null || true; done
  sleep 0.2
  rm -rf "$work"
}
trap scratch_cleanup EXIT
