#!/usr/bin/env bash
# 100k keys on one thread, visited in the order they were added (round-robin) and in a shuffled
# order, for floodgate's Limiter::hit (limiter_hit's scenarios 2, 3, 6, 7) and
# Guava's tryAcquire (GuavaOrder.java), alternating the two programs REPS times and printing each
# run's medians. Needs a JDK and Guava (Debian: default-jdk-headless libguava-java;
# bench/peers/setup.sh installs both).
#
#   bench/inprocess/visit_order.sh [limiter_hit=build/release/bench/limiter_hit] [algorithms=fixed_window,gcra]
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIMITER_HIT="${1:-build/release/bench/limiter_hit}"
ALGOS="${2:-fixed_window,gcra}"
REPS="${REPS:-3}"
SECONDS_PER_RUN="${SECONDS_PER_RUN:-1}"
GUAVA_JAR="${GUAVA_JAR:-/usr/share/java/guava.jar}"
[ -x "$LIMITER_HIT" ] || { echo "no $LIMITER_HIT: build the release preset's limiter_hit" >&2; exit 2; }
[ -r "$GUAVA_JAR" ] || { echo "no $GUAVA_JAR: apt-get install libguava-java" >&2; exit 2; }
command -v javac >/dev/null || { echo "no javac: apt-get install default-jdk-headless" >&2; exit 2; }
CLASSES="$(mktemp -d)"
trap 'rm -rf "$CLASSES"' EXIT
javac -d "$CLASSES" -cp "$GUAVA_JAR" "$HERE/GuavaOrder.java"
for rep in $(seq 1 "$REPS"); do
  echo "== run $rep"
  "$LIMITER_HIT" "$SECONDS_PER_RUN" 3 "$ALGOS" 2367 | tail -n +2
  java -cp "$GUAVA_JAR:$CLASSES" GuavaOrder "$SECONDS_PER_RUN" 3 | tail -n +2
done
