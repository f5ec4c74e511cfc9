# Sourced by the service benchmarks (compare_http.sh, cpu_per_decision.sh, ../http/compare_tls.sh):
# write_bench_config DIR writes DIR/rules/bench.yaml (one envoyproxy/ratelimit rule, 1,000,000 per
# second on remote_address) and DIR/bench.yaml, the `floodgate serve` configuration that serves it
# over gRPC beside an HTTP policy of the same limit (X-Real-IP), so both APIs decide alike.
write_bench_config() {
  mkdir -p "$1/rules"
  cat >"$1/rules/bench.yaml" <<YAML
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000}
YAML
  cat >"$1/bench.yaml" <<YAML
log_level: warn
policies:
  - {name: web, strategy: fixed-window, limit: 1000000/second, key: {header: X-Real-IP}}
rls:
  config: $1/rules
  listen: 127.0.0.1:0
YAML
}
