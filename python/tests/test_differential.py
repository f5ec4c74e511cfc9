"""floodgate.limits against the `limits` package it replaces: the same random call sequences
(items, costs, identifiers, hit/test/get_window_stats/clear, times stepped on both clocks) must get
the same decisions from the fixed window, the moving window and the sliding window counter.

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
    """Undoes a refused fixed-window hit in `limits`' memory storage: the window it opened (the
    key was empty), or the cost it added (decr; limits 2.8 has none, so its counter directly)."""
    if before == 0:
        storage.clear(key)
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
    """The same sequences on Redis, for the moving window: `limits` decides it on the caller's
    timestamps (which the test steps), and floodgate with `clock=client`. Its fixed window and
    sliding window counter on Redis follow the server's key TTLs, which no test can step."""

    def setUp(self):
        port = open(REDIS_PORT_FILE).read().strip()
        self.PEER_URL = f"redis://127.0.0.1:{port}/0"
        self.OUR_URL = f"redis://127.0.0.1:{port}/0?clock=client"

    def test_fixed_window(self):
        self.skipTest("limits' Redis fixed window runs on the server's TTLs")

    def test_sliding_window_counter(self):
        self.skipTest("limits' Redis sliding window counter runs on the server's TTLs")


if __name__ == "__main__":
    unittest.main()
