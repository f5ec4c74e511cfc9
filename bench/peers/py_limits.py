#!/usr/bin/env python3
"""Decision throughput of the Python `limits` library (alisaifee/limits).

usage: py_limits.py inmem|redis RUN_INDEX
       py_limits.py --describe     (one JSON line: which `limits`, its version, its strategies)
  env: LIMITS_SRC (a source tree holding limits/, put first on sys.path; unset: the
       interpreter's own, e.g. Debian's python3-limits), BENCH_SECONDS (time cap per
       measurement), REDIS_PORT (redis mode), PY_STRATEGIES (comma list, optional),
       PY_SCENARIOS (comma list of keys:regime, optional)

A strategy that the `limits` in use does not have (SlidingWindowCounterRateLimiter is not in
Debian 12's limits 2.8.0) is skipped with a note on stderr.

One JSON line per measurement on stdout. Every loop is bounded by an op count and a
time cap (the clock is read every CHECK ops).

Scenarios:
  keys=1      every decision on the same key
  keys=100000 decisions over 100k distinct, pre-built key strings, visited in one shared
              random order (visit_order(): xorshift32, the same sequence in every peer's
              benchmark), after a warm-up pass in creation order
  regime=allow  limit never reached (10**9 per hour)
  regime=deny   1 per hour: only the first decision of each key is allowed
In-memory runs first make one warm-up pass over the key space, so the timed part sees
existing keys only (in "deny" every timed decision is a reject).
"""
import json
import os
import sys
import time

LIMITS_SRC = os.environ.get("LIMITS_SRC", "")
if LIMITS_SRC:
    sys.path.insert(0, LIMITS_SRC)

import limits  # noqa: E402
import limits.strategies  # noqa: E402
from limits import RateLimitItemPerHour  # noqa: E402
from limits.storage import MemoryStorage  # noqa: E402

NKEYS = 100_000
CLASSES = {
    "fixed_window": "FixedWindowRateLimiter",
    "moving_window": "MovingWindowRateLimiter",
    "sliding_window_counter": "SlidingWindowCounterRateLimiter",
}
STRATEGIES = {name: getattr(limits.strategies, cls) for name, cls in CLASSES.items()
              if hasattr(limits.strategies, cls)}
LIMIT = {"allow": RateLimitItemPerHour(10**9), "deny": RateLimitItemPerHour(1)}


VISITS = 1 << 20


def visit_order(keys):
    """VISITS keys drawn uniformly from `keys` by xorshift32 (seed 2463534242): the same
    sequence as GuavaBench.java, node_peers.js and fg_inmem.cpp. One key: itself."""
    if len(keys) == 1:
        return keys
    x, n, out = 2463534242, len(keys), []
    for _ in range(VISITS):
        x ^= (x << 13) & 0xFFFFFFFF
        x ^= x >> 17
        x ^= (x << 5) & 0xFFFFFFFF
        out.append(keys[x % n])
    return out


def loop(hit, item, keys, cap, max_ops, check):
    nkeys = len(keys)
    ops = allowed = 0
    t0 = time.perf_counter()
    deadline = t0 + cap
    while ops < max_ops:
        base = ops
        for j in range(check):
            if hit(item, keys[(base + j) % nkeys]):
                allowed += 1
        ops += check
        if time.perf_counter() > deadline:
            break
    return ops, time.perf_counter() - t0, allowed


def describe():
    """Which `limits` this interpreter imports, from where, and what it lacks."""
    path = os.path.dirname(os.path.abspath(limits.__file__))
    if LIMITS_SRC and not path.startswith(os.path.abspath(LIMITS_SRC) + os.sep):
        sys.exit(f"LIMITS_SRC={LIMITS_SRC} holds no limits/ package (imported {path} instead)")
    missing = [f"{name} (no {CLASSES[name]} in limits {limits.__version__})"
               for name in CLASSES if name not in STRATEGIES]
    print(json.dumps({"bench": "meta", "what": "python-limits", "version": limits.__version__,
                      "path": path, "from": "LIMITS_SRC" if LIMITS_SRC else "the interpreter's",
                      "strategies": ",".join(STRATEGIES), "skipped": "; ".join(missing) or "none",
                      "python": sys.version.split()[0]}))


def main():
    if sys.argv[1] == "--describe":
        describe()
        return
    mode = sys.argv[1]
    run = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    cap = float(os.environ.get("BENCH_SECONDS", "2"))
    strategies = os.environ.get("PY_STRATEGIES", ",".join(STRATEGIES)).split(",")
    if mode == "inmem":
        scenarios = ["1:allow", "1:deny", f"{NKEYS}:allow", f"{NKEYS}:deny"]
        check, max_ops = 1024, 20_000_000
    else:
        scenarios = ["1:allow", f"{NKEYS}:allow"]
        check, max_ops = 128, 2_000_000
    scenarios = os.environ.get("PY_SCENARIOS", ",".join(scenarios)).split(",")
    all_keys = [f"user:{i}" for i in range(NKEYS)]
    port = int(os.environ.get("REDIS_PORT", "6390"))

    for sname in strategies:
        if sname not in STRATEGIES:
            print(f"py_limits: skipping {sname}: limits {limits.__version__} has no "
                  f"{CLASSES.get(sname, sname)}", file=sys.stderr)
            continue
        for sc in scenarios:
            nk, regime = sc.split(":")
            nk = int(nk)
            keys = all_keys[:nk]
            if mode == "inmem":
                storage = MemoryStorage()
                storage_name = "memory"
            else:
                from limits.storage import RedisStorage
                storage = RedisStorage(f"redis://127.0.0.1:{port}/0")
                storage.reset()  # drops the LIMITS* keys left by the previous measurement
                storage_name = "redis"
            limiter = STRATEGIES[sname](storage)
            item = LIMIT[regime]
            if mode == "inmem":
                # warm-up: one pass over the whole key space, so that the measurement sees
                # existing keys (steady state; in "deny" every measured decision is a reject)
                loop(limiter.hit, item, keys, 30, max(nk, 5000), 50)
            else:
                # warm-up on a disjoint key space (loads the Lua scripts); in a 2-s run a
                # sequential client reaches each of the 100k keys at most once (first touch)
                loop(limiter.hit, item, ["warm:" + k for k in keys[:1000]], 0.2, 2000, 50)
            ops, secs, allowed = loop(limiter.hit, item, visit_order(keys), cap, max_ops, check)
            print(json.dumps({
                "bench": mode, "peer": "python-limits", "lang": "python",
                "version": limits.__version__, "storage": storage_name,
                "algorithm": sname,
                "api": f"{STRATEGIES[sname].__name__}({type(storage).__name__}).hit(item, key)",
                "keys": nk, "order": "random" if nk > 1 else "one", "regime": regime, "ops": ops, "seconds": round(secs, 6),
                "ops_per_s": round(ops / secs, 1), "allowed": allowed,
                "threads": 1, "concurrency": 1, "run": run,
                "python": sys.version.split()[0],
            }), flush=True)
            if mode == "inmem":
                storage.timer.cancel()
            else:
                storage.reset()


if __name__ == "__main__":
    main()
