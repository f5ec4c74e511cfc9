#!/usr/bin/env bash
# packaging/monitoring/alerts.yaml: valid rules (promtool check rules), which fire as its unit
# tests expect (promtool test rules), and every floodgate series they read is one /metrics has or
# documents (docs/http-api.md, docs/envoy.md).
set -euo pipefail
root="$1"
cd "$root/packaging/monitoring"
promtool check rules alerts.yaml
promtool test rules alerts_test.yaml
for series in $(grep -o 'floodgate_[a-z_]*' alerts.yaml | sed 's/_bucket$//' | sort -u); do
  grep -rqs -- "$series" "$root/docs/http-api.md" "$root/docs/envoy.md" "$root/src" \
    || { echo "check_alerts.sh: $series is neither served nor documented" >&2; exit 1; }
done
echo "alerts: valid, their tests pass, every series exists"
