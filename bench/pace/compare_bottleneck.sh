#!/usr/bin/env bash
# `floodgate pace --limit 20/second` over 200 lines against Bottleneck (npm) at the same rate, in
# one run; prints both summaries. Installs bottleneck into a temporary directory.
#   bench/pace/compare_bottleneck.sh build/release/floodgate [RATE=20] [LINES=200]
set -euo pipefail
floodgate="$1"; rate="${2:-20}"; lines="${3:-200}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
cp "$here/gaps.js" "$here/bottleneck.js" "$work/"
(cd "$work" && npm install --silent --no-audit --no-fund bottleneck@2 >/dev/null 2>&1)
# The lines arrive a second late, so that the reader (node) is up before the first one is paced.
echo "floodgate pace: $( (sleep 1; seq "$lines") | "$floodgate" pace --limit "$rate/second" | node "$work/gaps.js" "$rate")"
echo "bottleneck:     $(cd "$work" && node bottleneck.js "$rate" "$lines")"
