#!/usr/bin/env bash
# How long a slot freed by one instance takes to reach a waiter in another (Throttle::acquire_lease
# polls the store: 1 ms doubling to 16 ms, each wait jittered down to half). Policy `1 concurrent
# for 10 seconds`, one key: a holder releases after a random 20–80 ms, the waiter notes when its
# acquire_lease returns; ROUNDS rounds (default 300) on the memory store (one Limiter, both threads)
# and on a Redis (two Limiters, each with its own storage and connections). Prints one JSON line per
# storage (handoff_ms p50/p90/p99/max, waiter_store_calls per hand-off; bench/concurrency/
# handoff.cpp says what each field is). Loopback only; starts and stops its own redis-server; each
# run is cut at 120 s. About 2 × ROUNDS × 60 ms.
#   bench/concurrency/handoff.sh build/release/bench/lease_handoff [ROUNDS]
# (built by `cmake --build --preset release --target lease_handoff`)
set -euo pipefail
handoff="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
rounds="${2:-300}"
here="$(cd "$(dirname "$0")" && pwd)"
fixture="$here/../../tests/integration/redis/redis_fixture.sh"
work="$(mktemp -d)"
# shellcheck disable=SC2317  # run by the trap
cleanup() {
  if [[ -d "$work/redis" ]]; then "$fixture" stop "$work/redis" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

status=0
timeout 120 "$handoff" --storage memory --rounds "$rounds" || status=1
"$fixture" start-single "$work/redis" >/dev/null
timeout 120 "$handoff" --storage "redis://127.0.0.1:$(cat "$work/redis/port")" --rounds "$rounds" || status=1
exit "$status"
