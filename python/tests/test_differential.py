"""floodgate.limits against the `limits` package it replaces: the same random call sequences
(items, costs, identifiers, hit/test/get_window_stats/clear, times stepped on both clocks) must get
the same decisions from the fixed window, the moving window and the sliding window counter, on
`limits`' memory storage and on Redis (RedisDifferential).

`limits` is whichever is first on sys.path: 5.8 (PYTHONPATH=…/limits-5.8.0, the reference) or
Debian's python3-limits 2.8, compared only where 2.8 agrees with 5.8 (no sliding window counter,
no cost above the limit on the moving window, `test` without a cost, whole-second reset times).

Both clocks read one integer count of microseconds: floodgate's ManualClock, and `time.time`
patched for `limits`. Every step that moves the clock is a multiple of 1/8 s plus 1 µs, so no
unit is ever exactly a period old and no hit falls exactly on a bucket edge: there `limits`
itself decides two ways (its memory moving window counts an entry exactly a period old in `hit`
but not in `get_window_stats`) — and floats stay far from the integer boundaries of the sliding
window's weighted count.

One difference is by design and is applied to `limits` in the harness: a refused hit charges
nothing in floodgate, while `limits`' fixed window adds a refused hit's cost to its counter (a
cost that does not fit then blocks smaller ones until the window ends). The harness takes the
refused cost back out of `limits`' counter (decr, or clear when the hit opened the window), which
is floodgate's rule written in `limits`' terms (docs/python.md, "Where floodgate differs").
"""

import os
import random
import time
import unittest
from unittest import mock

import limits as peer
from limits import strategies as peer_strategies
from limits.storage import storage_from_string as peer_storage_from_string

import floodgate
import floodgate.limits as fl

PEER = tuple(int(x) for x in peer.__version__.split(".")[:2])
MODERN = PEER >= (4, 1)  # test(cost=…), float reset times, the sliding window counter
SEQUENCES = int(os.environ.get("FLOODGATE_DIFF_SEQUENCES", "300"))
CALLS = int(os.environ.get("FLOODGATE_DIFF_CALLS", "200"))
START_US = 1_000_000_000  # 1000 s after the epoch: floats of `limits` hold µs far below 1e-9 s
RATES = ["3/second", "5 per 2 seconds", "4 per 3 seconds", "2/second", "7 per 2 seconds"]
STEPS = [0, 1, 1, 2, 3, 4, 5, 8, 13, 24]  # eighths of a second (plus 1 µs when not 0)


class Clocks:
    """One time for both libraries, in integer microseconds."""

    def __init__(self):
        self.us = START_US
        self.manual = floodgate.ManualClock(START_US / 1e6)

    def step(self, eighths):
        if eighths == 0:
            return
        d = eighths * 125_000 + 1
        self.us += d
        self.manual.advance(d / 1e6)

    def peer_time(self):
        return self.us / 1e6


class Differential(unittest.TestCase):
    PEER_URL = OUR_URL = "memory://"

    def run_sequence(self, name, seed, peer_cls, ours_cls):
        rng = random.Random(seed)
        clocks = Clocks()
        with mock.patch("time.time", clocks.peer_time):
            peer_storage = peer_storage_from_string(self.PEER_URL)
            own_the_expiry(peer_storage)
            theirs = peer_cls(peer_storage)
            ours = ours_cls(fl.storage_from_string(self.OUR_URL), clock=clocks.manual)
            space = f"S{seed}-{time.time_ns()}"  # fresh keys in a shared server
            items = [fl.parse(r) for r in rng.sample(RATES, 2)]
            items = [type(i)(i.amount, i.multiples, namespace=space) for i in items]
            peer_items = [type(peer.parse(repr_rate(i)))(i.amount, i.multiples, namespace=space) for i in items]
            ids = [("user", 1), ("user", 2), ("k",)]
            calls = 0
            try:
                for n in range(CALLS):
                    clocks.step(rng.choice(STEPS))
                    expire_peer_events(peer_storage)
                    k = rng.randrange(len(items))
                    item, peer_item, who = items[k], peer_items[k], rng.choice(ids)
                    op = rng.choices(["hit", "test", "stats", "clear"], [60, 15, 20, 2])[0]
                    cost = self.cost(rng, name, item)
                    where = f"{name} seed {seed} call {n}: {op} {item} {who} cost {cost} at {clocks.us} µs"
                    self.compare(op, name, ours, theirs, peer_storage, item, peer_item, who, cost, where)
                    calls += 1
            finally:
                if hasattr(peer_storage, "timer"):
                    peer_storage.timer.cancel()
        return calls

    def cost(self, rng, name, item):
        if name == "moving" and not MODERN:
            return rng.choice([1, 1, 1, 2, item.amount])  # 2.8 admits more than the limit
        return rng.choice([1, 1, 1, 1, 2, 3, item.amount, item.amount + 1])

    def compare(self, op, name, ours, theirs, peer_storage, item, peer_item, who, cost, where):
        if op == "hit":
            key = peer_item.key_for(*who)
            before = peer_storage.get(key) if name == "fixed" else None
            got, want = ours.hit(item, *who, cost=cost), theirs.hit(peer_item, *who, cost=cost)
            if name == "fixed" and not want:  # floodgate's rule: a refused hit charges nothing
                take_back(peer_storage, key, cost, before)
            self.assertEqual(got, want, where)
        elif op == "test":
            if MODERN:
                self.assertEqual(ours.test(item, *who, cost=cost), theirs.test(peer_item, *who, cost=cost), where)
            else:
                self.assertEqual(ours.test(item, *who), theirs.test(peer_item, *who), where)
        elif op == "stats":
            got, want = ours.get_window_stats(item, *who), theirs.get_window_stats(peer_item, *who)
            self.assertEqual(got[1], want[1], where + f": remaining, floodgate {got} limits {want}")
            if MODERN and name != "sliding":  # the sliding window's reset time: docs/python.md
                self.assertAlmostEqual(got[0], want[0], delta=2e-6, msg=where + f": reset, {got} vs {want}")
        else:
            ours.clear(item, *who)
            theirs.clear(peer_item, *who)

    def check(self, name, peer_cls, ours_cls):
        calls = sum(self.run_sequence(name, seed, peer_cls, ours_cls) for seed in range(SEQUENCES))
        print(f"\n{name}: {SEQUENCES} sequences, {calls} calls, limits {peer.__version__}: same decisions")
        self.assertEqual(calls, SEQUENCES * CALLS)

    def test_fixed_window(self):
        self.check("fixed", peer_strategies.FixedWindowRateLimiter, fl.FixedWindowRateLimiter)

    def test_moving_window(self):
        self.check("moving", peer_strategies.MovingWindowRateLimiter, fl.MovingWindowRateLimiter)

    @unittest.skipUnless(MODERN, "limits 2.8 has no sliding window counter")
    def test_sliding_window_counter(self):
        self.check("sliding", peer_strategies.SlidingWindowCounterRateLimiter, fl.SlidingWindowCounterRateLimiter)


def repr_rate(item):
    return f"{item.amount} per {item.multiples} {item.GRANULARITY.name}"


def take_back(storage, key, cost, before):
    """Undoes a refused fixed-window hit in `limits`' storage: the window it opened (the key was
    empty), or the cost it added (decr; Redis: DECRBY on its prefixed key; limits 2.8's memory
    storage has none, so its counter directly)."""
    if before == 0:
        storage.clear(key)
    elif hasattr(storage, "prefixed_key"):
        storage.get_connection().decrby(storage.prefixed_key(key), cost)
    elif hasattr(storage, "decr"):
        storage.decr(key, cost)
    else:
        storage.storage[key] -= cost


def own_the_expiry(storage):
    """Stops `limits`' memory storage from expiring on its own timer thread (every 10 ms, which
    would race with expire_peer_events), so that expiry happens only at the harness's steps."""
    if hasattr(storage, "timer"):
        storage.timer.cancel()
        storage.timer.join()  # had it fired already, its one run is over
        storage._MemoryStorage__schedule_expiry = lambda: None


def expire_peer_events(storage):
    """What `limits`' own expiry timer does every 10 ms, done at each step instead (own_the_expiry):
    its memory moving window then reads the same log in `hit` and `get_window_stats` (it drops
    units a period old or more)."""
    if hasattr(storage, "_MemoryStorage__expire_events"):
        storage._MemoryStorage__expire_events()


REDIS_PORT_FILE = os.environ.get("FLOODGATE_REDIS_PORT_FILE", "")


@unittest.skipUnless(REDIS_PORT_FILE and MODERN, "needs a Redis server (FLOODGATE_REDIS_PORT_FILE) and limits 5.8")
class RedisDifferential(Differential):
    """The same sequences on Redis. The moving window on stepped clocks: `limits` decides it on the
    caller's timestamps, and floodgate with `clock=client`. `limits`' fixed window and sliding
    window counter on Redis follow the server's key TTLs, which no test can step: they are compared
    on the real clock inside periods of days (costs, refusals, test, remaining, clear), never
    across a window's or bucket's edge (RealClock)."""

    def setUp(self):
        with open(REDIS_PORT_FILE) as f:
            port = f.read().strip()
        self.PEER_URL = f"redis://127.0.0.1:{port}/0"
        # A generous command timeout: on a loaded machine a reply past the default 50 ms would be a
        # storage error, decided by the fail mode, where this test compares decisions.
        self.OUR_URL = f"redis://127.0.0.1:{port}/0?clock=client&timeout_ms=5000"

    def test_fixed_window(self):
        self.check_real_time("fixed", peer_strategies.FixedWindowRateLimiter, fl.FixedWindowRateLimiter)

    def test_sliding_window_counter(self):
        self.check_real_time("sliding", peer_strategies.SlidingWindowCounterRateLimiter,
                             fl.SlidingWindowCounterRateLimiter)

    def check_real_time(self, name, peer_cls, ours_cls):
        sequences = max(1, SEQUENCES // 3)
        peer_storage = peer_storage_from_string(self.PEER_URL)
        ours_storage = fl.storage_from_string(self.OUR_URL.replace("clock=client&", ""))  # the server's clock, as limits
        calls = 0
        for seed in range(sequences):
            RealClock.clear_of_edges()
            rng = random.Random(seed)
            theirs, ours = peer_cls(peer_storage), ours_cls(ours_storage)
            space = f"R{seed}-{time.time_ns()}"
            items = [fl.parse(r) for r in rng.sample(RealClock.RATES, 2)]
            items = [type(i)(i.amount, i.multiples, namespace=space) for i in items]
            peer_items = [type(peer.parse(repr_rate(i)))(i.amount, i.multiples, namespace=space) for i in items]
            for n in range(CALLS):
                k = rng.randrange(len(items))
                who = rng.choice([("user", 1), ("user", 2), ("k",)])
                op = rng.choices(["hit", "test", "stats", "clear"], [60, 15, 20, 2])[0]
                cost = self.cost(rng, name, items[k])
                where = f"{name} (Redis, real clock) seed {seed} call {n}: {op} {items[k]} {who} cost {cost}"
                if op == "stats":  # remaining only: the two reset times are read at two instants
                    got = ours.get_window_stats(items[k], *who)
                    want = theirs.get_window_stats(peer_items[k], *who)
                    self.assertEqual(got[1], want[1], where + f": remaining, floodgate {got} limits {want}")
                else:
                    self.compare(op, name, ours, theirs, peer_storage, items[k], peer_items[k], who, cost, where)
                calls += 1
        print(f"\n{name} (Redis, real clock): {sequences} sequences, {calls} calls, limits {peer.__version__}: same decisions")
        self.assertEqual(calls, sequences * CALLS)


class RealClock:
    """Periods of days, so that a sequence (well under a minute) never meets the end of a fixed
    window (it opens at the first hit) or a sliding window counter's bucket (aligned to the epoch)
    unless it starts within a minute of one: then it waits the edge out."""

    RATES = ["3/day", "5 per 2 days", "4/day", "2/day", "7 per 3 days"]
    PERIODS = (86400, 2 * 86400, 3 * 86400)

    @classmethod
    def clear_of_edges(cls):
        now = time.time()
        wait = max((-now % p) + 1 if -now % p < 60 else 0 for p in cls.PERIODS)
        time.sleep(wait)


if __name__ == "__main__":
    unittest.main()
