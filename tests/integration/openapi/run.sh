#!/usr/bin/env bash
# docs/openapi.yaml against an OpenAPI 3.1 validator nobody here wrote, and the binary's answers
# against it (check.mjs).
#   run.sh install NODE_DIR             npm ci of package-lock.json into NODE_DIR
#   run.sh test SPEC FLOODGATE NODE_DIR node check.mjs SPEC FLOODGATE
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [[ "$1" == install ]]; then
  mkdir -p "$2"
  cp "$here/package.json" "$here/package-lock.json" "$2/"
  (cd "$2" && npm ci --no-audit --no-fund --silent)
  exit 0
fi
cp "$here/check.mjs" "$4/"
cd "$4" && node check.mjs "$2" "$3"
