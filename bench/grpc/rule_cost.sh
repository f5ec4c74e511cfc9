#!/usr/bin/env bash
# What a rule set with nested wildcards and share_threshold costs per descriptor, against a plain
# one-key rule: ShouldRateLimit decisions/s
# and the server's CPU time per decision (utime + stime from /proc), memory store, REPS runs each,
# interleaved, medians. An optional second binary (a build from before) runs the plain rule too.
#   bench/grpc/rule_cost.sh build/release/floodgate build/release/bench/rls_load [BASE_FLOODGATE]
#   env: SECONDS_EACH (8), REPS (3), CONCURRENCY (64)
set -euo pipefail
floodgate="$1"; load="$2"; base="${3:-}"
seconds="${SECONDS_EACH:-8}"; reps="${REPS:-3}"; concurrency="${CONCURRENCY:-64}"
source "$(dirname "${BASH_SOURCE[0]}")/../../tests/support/scratch_dir.sh"  # $work, cleaned up on exit

mkdir -p "$work/plain" "$work/nested"
cat >"$work/plain/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
YAML
# The request [path=/api/v1/users, remote_address=10.0.x.y] goes past an exact sibling and a
# wildcard sibling that do not match, into a nested wildcard shared by every address.
cat >"$work/nested/bench.yaml" <<'YAML'
domain: bench
descriptors:
  - key: path
    value: /admin/*
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: path
    value: /api/v2/users
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: path
    value: /api/*/users
    descriptors:
      - key: remote_address
        value: 192.168.*
        rate_limit: {unit: second, requests_per_unit: 10}
      - key: remote_address
        value: 10.0.*
        share_threshold: true
        rate_limit: {unit: second, requests_per_unit: 1000000000}
YAML

run() {  # run BINARY RULES LABEL [load options...]
  local bin="$1" rules="$2" label="$3"; shift 3
  printf 'log_level: warn\nrls:\n  config: %s\n  listen: 127.0.0.1:0\n' "$work/$rules" >"$work/fg.yaml"
  rm -f "$work/port" "$work/grpc.port"
  "$bin" serve --config "$work/fg.yaml" --storage memory --listen 127.0.0.1:0 --threads 2 \
    --port-file "$work/port" --grpc-port-file "$work/grpc.port" 2>"$work/serve.log" &
  local pid=$!
  echo "$pid" >"$work/pid"
  for _ in $(seq 100); do [[ -s "$work/grpc.port" ]] && break; sleep 0.05; done
  [[ -s "$work/grpc.port" ]] || { cat "$work/serve.log" >&2; exit 1; }
  local t0 t1 out
  t0="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
  out="$("$load" --target "127.0.0.1:$(cat "$work/grpc.port")" --domain bench --key remote_address \
    --keys 10000 --concurrency "$concurrency" --channels 2 --seconds "$seconds" "$@")"
  t1="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -f "$work/pid"
  python3 - "$label" "$t0" "$t1" "$(getconf CLK_TCK)" "$out" <<'PY' >>"$work/results"
import re, sys
label, t0, t1, tck, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
m = re.search(r"decisions/s: (\d+)\s+\((\d+) in [\d.]+ s; OK (\d+), OVER_LIMIT (\d+), errors (\d+)", out)
rate, n, ok, over, err = (int(x) for x in m.groups())
if ok != n:
    sys.exit(f"{label}: {n - ok} decisions were not OK (over limit {over}, errors {err}): the rule did not match")
print(f"{label}\t{rate}\t{(t1 - t0) / tck / n * 1e6:.2f}")
PY
}

for rep in $(seq "$reps"); do
  run "$floodgate" plain "plain rule, this build"
  run "$floodgate" nested "nested wildcards + share_threshold, this build" --prefix path=/api/v1/users
  [[ -n "$base" ]] && run "$base" plain "plain rule, base build"
done
python3 - "$work/results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, rate, cpu = line.rstrip("\n").split("\t")
    rows.setdefault(label, []).append((int(rate), float(cpu)))
print(f"{'rule set':<50} {'decisions/s':>12} {'CPU µs/decision':>16}  (medians of {len(next(iter(rows.values())))})")
for label, v in rows.items():
    print(f"{label:<50} {statistics.median(r for r, _ in v):>12.0f} {statistics.median(c for _, c in v):>16.2f}")
PY
