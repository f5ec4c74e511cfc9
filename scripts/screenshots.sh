#!/usr/bin/env bash
# Regenerates the pictures of the docs from the real binary in a real browser: docs/playground.png
# and docs/live.png (tests/integration/browser/dashboard_test.mjs) and docs/simulate-report.png
# (report_test.mjs). Installs what is missing and builds the release binary first.
#   scripts/screenshots.sh [path/to/floodgate]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --test
binary="${1:-}"
if [[ -z "$binary" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release -j"$(nproc)" --target floodgate_cli >/dev/null
  binary=build/release/floodgate
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tests/integration/browser/run.sh "$binary" "$work/dashboard"
tests/integration/browser/run.sh "$binary" "$work/report" report_test.mjs "$PWD/bench/simulate/make_log.py"
cp "$work/dashboard/artifacts/playground.png" docs/playground.png
cp "$work/dashboard/artifacts/live.png" docs/live.png
cp "$work/report/artifacts/report.png" docs/simulate-report.png
echo "wrote docs/playground.png docs/live.png docs/simulate-report.png"
