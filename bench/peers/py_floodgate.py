#!/usr/bin/env python3
"""floodgate.limits beside the Python `limits` it replaces, in one process: hit() per second.

usage: PYTHONPATH=build/release/python [LIMITS_SRC=DIR] python3 bench/peers/py_floodgate.py [memory|redis]
  env: LIMITS_SRC (a source tree holding limits/, as for py_limits.py; unset: the interpreter's),
       BENCH_SECONDS (time cap per measurement, default 1), REPS (runs per row, the two libraries
       interleaved, the medians shown; default 3), REDIS_PORT (redis mode, default 6390),
       THREADS (default "1,4,16"), ONE_KEY_ONLY=1 (the one-key rows alone: a quick run)

For each strategy `limits` has (and those it lacks, floodgate only): one key and 100k keys in the
harness's shared random order (py_limits.visit_order), a limit never reached (10**9 per hour),
then the thread scaling of 16 threads on 100k keys. One table in Markdown on stdout.
"""
import os
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import py_limits  # noqa: E402  (LIMITS_SRC handling, visit_order)
from py_limits import limits, visit_order  # noqa: E402

import floodgate.limits as fl  # noqa: E402

NKEYS = 100_000
SECONDS = float(os.environ.get("BENCH_SECONDS", "1"))
REPS = int(os.environ.get("REPS", "3"))
THREADS = [int(t) for t in os.environ.get("THREADS", "1,4,16").split(",")]
ONE_KEY_ONLY = os.environ.get("ONE_KEY_ONLY", "0")
NAMES = ["FixedWindowRateLimiter", "MovingWindowRateLimiter", "SlidingWindowCounterRateLimiter",
         "TokenBucketRateLimiter", "GCRARateLimiter"]


def rate(hit, item, keys, threads=1):
    """Hits per second of `threads` threads each walking `keys` (offset per thread)."""
    counts = [0] * threads
    stop = time.perf_counter() + SECONDS
    barrier = threading.Barrier(threads + 1)

    def run(t):
        n, nkeys, base = 0, len(keys), t * 7919
        barrier.wait()
        while time.perf_counter() < stop:
            for j in range(256):
                hit(item, keys[(base + n + j) % nkeys])
            n += 256
        counts[t] = n

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    t0 = time.perf_counter()
    barrier.wait()
    for w in workers:
        w.join()
    return sum(counts) / (time.perf_counter() - t0)


def one_rate(make, item, keys, threads):
    strategy, done = make()
    for k in keys[: min(len(keys), NKEYS)]:  # warm-up: every key exists
        strategy.hit(item, k)
    r = rate(strategy.hit, item, keys, threads)
    done()
    return r


def median_rates(make_ours, make_theirs, items, keys, threads=1):
    """Medians of REPS runs of each library, the two interleaved run by run (a noisy neighbour
    then weighs on both)."""
    ours, theirs = [], []
    for _ in range(REPS):
        ours.append(one_rate(make_ours, items[0], keys, threads))
        if make_theirs:
            theirs.append(one_rate(make_theirs, items[1], keys, threads))
    return statistics.median(ours), (statistics.median(theirs) if theirs else None)


def makers(mode, name):
    port = int(os.environ.get("REDIS_PORT", "6390"))
    theirs = getattr(limits.strategies, name, None)
    ours = getattr(fl, name)

    def limits_storage():
        if mode == "memory":
            s = limits.storage.MemoryStorage()
            return s, s.timer.cancel
        s = limits.storage.RedisStorage(f"redis://127.0.0.1:{port}/0")
        s.reset()
        return s, s.reset

    def make_theirs():
        s, done = limits_storage()
        return theirs(s), done

    def make_ours():
        url = "memory://" if mode == "memory" else f"redis://127.0.0.1:{port}/1"
        return ours(fl.storage_from_string(url)), lambda: None

    return (make_theirs if theirs else None), make_ours


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "memory"
    item_theirs = limits.RateLimitItemPerHour(10**9)
    item_ours = fl.RateLimitItemPerHour(10**9)
    all_keys = [f"user:{i}" for i in range(NKEYS)]
    print(f"floodgate.limits vs limits {limits.__version__} ({mode}; hits/s, median of {REPS} runs "
          f"of {SECONDS} s; Python {sys.version.split()[0]}, {os.cpu_count()} cores)\n")
    print("| strategy | keys | threads | limits | floodgate.limits | × |")
    print("|---|---|---|---|---|---|")
    for name in NAMES:
        make_theirs, make_ours = makers(mode, name)
        rows = [(1, [all_keys[0]], 1)] + [(NKEYS, visit_order(all_keys), t) for t in THREADS if ONE_KEY_ONLY != "1"]
        for nkeys, keys, threads in rows:
            ours, theirs = median_rates(make_ours, make_theirs, (item_ours, item_theirs), keys, threads)
            ratio = f"{ours / theirs:.1f}" if theirs else "–"
            shown = f"{theirs:,.0f}" if theirs else "(none)"
            print(f"| {name.replace('RateLimiter', '')} | {nkeys:,} | {threads} | {shown} | {ours:,.0f} | {ratio} |",
                  flush=True)


if __name__ == "__main__":
    main()
