#!/usr/bin/env bash
# `floodgate simulate` on access logs of 10^5, 10^6 and 10^7 requests (make_log.py: a day of nginx
# "combined" + API key lines), all 7 strategies and the HTML report: wall time, peak memory
# (/usr/bin/time -v) and report size; then each strategy alone on 10^6 requests (requests per
# second, log parsing included). Not a test: figures for docs/benchmarks.md.
# Usage: bench/simulate/run.sh build/release/floodgate [WORK_DIR]
set -euo pipefail
floodgate="$(realpath "$1")"
work="${2:-$(mktemp -d)}"
here="$(cd "$(dirname "$0")" && pwd)"
layout='$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_api_key"'
mkdir -p "$work"
printf '%-10s %10s %12s %12s %14s\n' requests "wall s" "peak RSS MB" "report KB" "req/s (x7)"
for n in 100000 1000000 10000000; do
  log="$work/log-$n.txt"
  [[ -s "$log" ]] || python3 "$here/make_log.py" "$n" "$log" --users $((n >= 10000000 ? 20000 : 5000))
  /usr/bin/time -v "$floodgate" simulate --limit 1/second --traffic "$log" --log-format "$layout" \
    --key ip/64 --out "$work/report-$n.html" >"$work/out-$n.txt" 2>"$work/time-$n.txt"
  wall="$(awk -F': ' '/Elapsed/ {n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s}' "$work/time-$n.txt")"
  rss="$(awk -F': ' '/Maximum resident/ {printf "%.0f", $2 / 1024}' "$work/time-$n.txt")"
  size="$(( $(stat -c %s "$work/report-$n.html") / 1024 ))"
  printf '%-10s %10s %12s %12s %14.0f\n' "$n" "$wall" "$rss" "$size" "$(echo "$n / $wall" | bc -l)"
done
echo
printf '%-24s %10s %14s\n' strategy "wall s" "req/s"
for s in fixed-window fixed-window-first-hit moving-window sliding-window-counter token-bucket leaky-bucket gcra; do
  start="$(date +%s.%N)"
  "$floodgate" simulate --limit 1/second --strategies "$s" --traffic "$work/log-1000000.txt" \
    --log-format "$layout" --key ip/64 >/dev/null
  wall="$(echo "$(date +%s.%N) - $start" | bc -l)"
  printf '%-24s %10.2f %14.0f\n' "$s" "$wall" "$(echo "1000000 / $wall" | bc -l)"
done
