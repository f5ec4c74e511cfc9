"""floodgate's Python API: decisions, reservations, leases, waiting, clocks, errors, threads."""

import math
import threading
import unittest

import floodgate


def limiter(clock=None):
    return floodgate.Limiter(floodgate.open_storage("memory://"), clock or floodgate.ManualClock(1000.0))


class Decisions(unittest.TestCase):
    def test_hit_test_stats_clear(self):
        lim = limiter()
        p = floodgate.Policy("3 per 10 seconds", "fixed-window")
        self.assertTrue(lim.test(p, "k", 3))
        self.assertEqual([bool(lim.hit(p, "k")) for _ in range(4)], [True, True, True, False])
        d = lim.hit(p, "k")
        self.assertFalse(d.allowed)
        self.assertEqual(d.retry_after, 10.0)  # the window of 1000 s ends at 1010 s
        self.assertEqual(lim.stats(p, "k").remaining, 0)
        lim.clear(p, "k")
        self.assertEqual(lim.stats(p, "k").remaining, 3)

    def test_every_strategy(self):
        lim = limiter()
        for strategy in ("fixed-window", "moving-window", "sliding-window-counter", "token-bucket",
                         "leaky-bucket", "gcra"):
            p = floodgate.Policy("2/second", strategy)
            self.assertEqual([lim.hit(p, "k").allowed for _ in range(3)], [True, True, False], strategy)

    def test_cost_above_the_limit_never_fits(self):
        d = limiter().hit(floodgate.Policy("2/second"), "k", 3)
        self.assertFalse(d)
        self.assertEqual(d.retry_after, math.inf)

    def test_bytes_and_str_keys(self):
        lim = limiter()
        p = floodgate.Policy("1/second")
        self.assertTrue(lim.hit(p, b"k"))
        self.assertFalse(lim.hit(p, "k"))

    def test_manual_clock(self):
        clock = floodgate.ManualClock(1000.0)
        lim = limiter(clock)
        p = floodgate.Policy("1/second", "gcra")
        self.assertTrue(lim.hit(p, "k"))
        self.assertFalse(lim.hit(p, "k"))
        clock.advance(1.0)
        self.assertEqual(clock.now(), 1001.0)
        self.assertTrue(lim.hit(p, "k"))


class BadInput(unittest.TestCase):
    def setUp(self):
        self.lim = limiter()
        self.p = floodgate.Policy("5/second")

    def assert_nothing_charged(self):
        self.assertEqual(self.lim.stats(self.p, "k").remaining, 5)

    def test_negative_cost(self):
        with self.assertRaisesRegex(floodgate.InvalidArgument, r"^cost: .*-1"):
            self.lim.hit(self.p, "k", -1)
        self.assert_nothing_charged()

    def test_non_integer_cost(self):
        for cost in (1.5, "1", True, None):
            with self.assertRaisesRegex(TypeError, "^cost: expected an int"):
                self.lim.hit(self.p, "k", cost)
        self.assert_nothing_charged()

    def test_cost_too_large(self):
        with self.assertRaisesRegex(floodgate.InvalidArgument, "^cost: "):
            self.lim.hit(self.p, "k", 2**60)
        self.assert_nothing_charged()

    def test_bad_rate_string_is_quoted(self):
        with self.assertRaises(floodgate.InvalidArgument) as e:
            floodgate.Policy("10/fortnight")
        self.assertIn("limits: ", str(e.exception))
        self.assertIn("fortnight", str(e.exception))
        self.assertIsInstance(e.exception, ValueError)

    def test_bad_strategy_and_anchor(self):
        with self.assertRaisesRegex(floodgate.InvalidArgument, '^strategy: unknown strategy "bogus"'):
            floodgate.Policy("1/second", "bogus")
        with self.assertRaisesRegex(floodgate.InvalidArgument, '^anchor: unknown anchor "x"'):
            floodgate.Policy("1/second", anchor="x")

    def test_bad_storage_url(self):
        with self.assertRaisesRegex(floodgate.InvalidArgument, "^url: "):
            floodgate.open_storage("mongodb://localhost")

    def test_unreachable_storage(self):
        with self.assertRaises(floodgate.StorageError):
            floodgate.open_storage("redis://127.0.0.1:1?connect_timeout_ms=200")

    def test_storage_failure_is_never_a_plain_allowed(self):
        storage = floodgate.open_storage("redis://127.0.0.1:1?connect_timeout_ms=100", background=True)
        lim = floodgate.Limiter(storage)
        self.assertTrue(lim.hit(floodgate.Policy("1/second", fail="open"), "k").degraded)
        closed = lim.hit(floodgate.Policy("1/second", fail="closed"), "k")
        self.assertEqual((closed.allowed, closed.degraded), (False, True))
        self.assertEqual(lim.degraded_count, 2)


class Reservations(unittest.TestCase):
    def test_reserve_then_settle_refunds(self):
        lim = limiter()
        p = floodgate.Policy("100/minute", "sliding-window-counter")
        r = lim.reserve(p, "k", 60)
        self.assertTrue(r.reserved)
        self.assertEqual(r.decision.remaining, 40)
        self.assertEqual(r.settle(10).remaining, 90)
        self.assertEqual(r.settle(10).remaining, 90)  # a second settle changes nothing

    def test_reserve_bad_estimate(self):
        lim = limiter()
        p = floodgate.Policy("100/minute")
        with self.assertRaisesRegex(floodgate.InvalidArgument, "^estimate: "):
            lim.reserve(p, "k", -5)
        self.assertEqual(lim.stats(p, "k").remaining, 100)


class Leases(unittest.TestCase):
    def test_lease_is_a_context_manager(self):
        lim = limiter()
        p = floodgate.Policy("1 concurrent for 1 minute", "concurrency")
        with lim.lease(p, "k") as lease:
            self.assertTrue(lease.held)
            with self.assertRaises(floodgate.Timeout):
                lim.lease(p, "k")
        with lim.lease(p, "k"):  # released by the with block
            pass

    def test_lease_of_a_rate_policy(self):
        with self.assertRaises(floodgate.InvalidArgument):
            limiter().lease(floodgate.Policy("1/second"), "k")


class Waiting(unittest.TestCase):
    def test_acquire_times_out_at_once(self):
        lim = limiter()
        p = floodgate.Policy("1 per 10 seconds", "gcra")
        lim.hit(p, "k")
        with self.assertRaises(floodgate.Timeout):
            lim.acquire(p, "k", timeout=1.0)

    def test_acquire_waits_on_the_manual_clock_without_the_gil(self):
        clock = floodgate.ManualClock(1000.0)
        lim = limiter(clock)
        p = floodgate.Policy("1/second", "gcra")
        lim.hit(p, "k")
        result = []
        waiter = threading.Thread(target=lambda: result.append(lim.acquire(p, "k", timeout=5.0)))
        waiter.start()
        # The waiter sleeps in C++ on the manual clock; this thread runs Python meanwhile, which it
        # could not if the wait held the GIL.
        while clock.sleepers() == 0:
            pass
        self.assertEqual(result, [])
        clock.advance(1.0)
        waiter.join(10)
        self.assertFalse(waiter.is_alive())
        self.assertTrue(result[0].allowed)


class Threads(unittest.TestCase):
    def hammer(self, decide, threads=16, per_thread=400):
        allowed = []
        barrier = threading.Barrier(threads)

        def run():
            barrier.wait()
            allowed.append(sum(1 for _ in range(per_thread) if decide()))

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        return sum(allowed)

    def test_sixteen_threads_admit_exactly_the_limit(self):
        lim = limiter()
        for strategy in ("fixed-window", "moving-window", "sliding-window-counter", "gcra"):
            p = floodgate.Policy("1000/hour", strategy)
            self.assertEqual(self.hammer(lambda: lim.hit(p, "one key").allowed), 1000, strategy)

    def test_sixteen_threads_through_floodgate_limits(self):
        import floodgate.limits as limits

        clock = floodgate.ManualClock(1000.0)
        window = limits.MovingWindowRateLimiter(limits.storage_from_string("memory://"), clock=clock)
        item = limits.parse("1000/hour")
        self.assertEqual(self.hammer(lambda: window.hit(item, "one", "key")), 1000)


class Errors(unittest.TestCase):
    def test_codes_map_to_exceptions(self):
        from floodgate import _floodgate

        for code, cls in ((3, floodgate.InvalidArgument), (5, floodgate.NotFound), (14, floodgate.StorageError),
                          (8, floodgate.ResourceExhausted), (12, floodgate.Unsupported)):
            with self.assertRaisesRegex(cls, "the message"):
                _floodgate._raise_for_test(code, "the message")


if __name__ == "__main__":
    unittest.main()
