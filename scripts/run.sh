#!/usr/bin/env bash
# The main job on a fresh Debian 12 machine: install what is missing, build the release binary,
# and run it. For now: `floodgate replay` of a bundled trace (a client bursting against a
# "3 per 12 seconds" GCRA policy, seed 001's example); the service replaces it in a later issue.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target floodgate_cli >/dev/null
echo "floodgate replay --strategy gcra --limit '3 per 12 seconds' < examples/traces/burst.jsonl" >&2
exec build/release/floodgate replay --strategy gcra --limit "3 per 12 seconds" "$@" \
  < examples/traces/burst.jsonl
