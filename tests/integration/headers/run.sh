#!/usr/bin/env bash
# The rate-limit headers against an RFC 8941 parser nobody here wrote (npm structured-headers).
#   run.sh install NODE_DIR            npm ci of package-lock.json into NODE_DIR
#   run.sh test SAMPLES NODE_DIR       header_samples | node check_headers.js
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ "$1" == install ]]; then
  mkdir -p "$2"
  cp "$here/package.json" "$here/package-lock.json" "$here/check_headers.js" "$2/"
  (cd "$2" && npm ci --no-audit --no-fund --silent)
  exit 0
fi
cp "$here/check_headers.js" "$3/"
"$2" | (cd "$3" && node check_headers.js)
