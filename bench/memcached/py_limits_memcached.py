#!/usr/bin/env python3
"""Python `limits` (5.x, with pymemcache) on the same memcached: decisions/s and p50/p99 latency
of RateLimiter.hit(item, key), one process, sequential (limits has no batch call), for the
strategies its memcached storage supports. Same regime as floodgate_memcached_benchmark: 10^9 per
hour over KEYS pre-built keys round-robin, after one warm-up pass.

usage: py_limits_memcached.py PORT SECONDS KEYS RUN   (LIMITS_SRC: the vendored source)
One JSON line per measurement on stdout.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.environ.get("LIMITS_SRC", ""))

from limits import RateLimitItemPerHour  # noqa: E402
from limits.storage import MemcachedStorage  # noqa: E402
from limits.strategies import (  # noqa: E402
    FixedWindowRateLimiter,
    SlidingWindowCounterRateLimiter,
)


def main():
    port, seconds, nkeys, run = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    storage = MemcachedStorage(f"memcached://127.0.0.1:{port}")
    keys = [f"py{run}:user:{i}" for i in range(nkeys)]
    item = RateLimitItemPerHour(10**9)
    for name, cls in (("fixed_window", FixedWindowRateLimiter),
                      ("sliding_window_counter", SlidingWindowCounterRateLimiter)):
        limiter = cls(storage)
        for k in keys:
            limiter.hit(item, k)
        lat = []
        clock = time.perf_counter
        start = clock()
        deadline = start + seconds
        i = 0
        allowed = 0
        while True:
            t0 = clock()
            if limiter.hit(item, keys[i % nkeys]):
                allowed += 1
            t1 = clock()
            lat.append((t1 - t0) * 1e6)
            i += 1
            if t1 > deadline:
                break
        elapsed = clock() - start
        lat.sort()
        print(json.dumps({"bench": "memcached", "peer": "limits-5.8", "algorithm": name,
                          "mode": "sequential", "keys": nkeys, "batch": 1, "run": run,
                          "ops_per_s": round(i / elapsed), "p50_us": round(lat[len(lat) // 2], 1),
                          "p99_us": round(lat[int(0.99 * (len(lat) - 1))], 1),
                          "errors": 0, "denied": i - allowed}), flush=True)


if __name__ == "__main__":
    main()
