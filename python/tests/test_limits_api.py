"""floodgate.limits: the API of `limits` (parse, items, storages, strategies) and its bad input."""

import unittest

import floodgate
import floodgate.limits as limits
from floodgate.limits.storage import floodgate_url


class Parsing(unittest.TestCase):
    def test_notations(self):
        self.assertEqual(limits.parse("10/minute"), limits.RateLimitItemPerMinute(10))
        self.assertEqual(limits.parse("5 per 2 seconds"), limits.RateLimitItemPerSecond(5, 2))
        self.assertEqual(limits.parse("1 PER DAY"), limits.RateLimitItemPerDay(1))
        self.assertEqual(limits.parse_many("1/second; 10/minute, 100 per hour | 2/year"),
                         [limits.RateLimitItemPerSecond(1), limits.RateLimitItemPerMinute(10),
                          limits.RateLimitItemPerHour(100), limits.RateLimitItemPerYear(2)])
        self.assertEqual(limits.RateLimitItemPerMonth(1).get_expiry(), 30 * 86400)
        self.assertEqual(repr(limits.parse("5 per 2 seconds")), "5 per 2 second")

    def test_keys_join_identifiers_with_str(self):
        item = limits.parse("10/minute")
        self.assertEqual(item.key_for("user", 42, b"x", 1.5), "LIMITER/user/42/x/1.5/10/1/minute")

    def test_bad_rate_string_names_the_argument_and_quotes_it(self):
        for bad in ("10/fortnight", "ten/second", "", "1/second;", "-1/second"):
            with self.assertRaises(floodgate.InvalidArgument) as e:
                limits.parse_many(bad)
            self.assertIn("limit_string: ", str(e.exception))
            self.assertIn(f'"{bad}"', str(e.exception))
            self.assertIsInstance(e.exception, ValueError)

    def test_zero_amount(self):
        with self.assertRaisesRegex(floodgate.InvalidArgument, "^amount: "):
            limits.RateLimitItemPerSecond(0)


class Storages(unittest.TestCase):
    def test_limits_urls_become_floodgate_urls(self):
        self.assertEqual(floodgate_url("memory://"), "memory://")
        self.assertEqual(floodgate_url("redis://h:6379/1"), "redis://h:6379/1")
        self.assertEqual(floodgate_url("redis+cluster://a:1,b:2"), "redis-cluster://a:1,b:2")
        self.assertEqual(floodgate_url("redis+sentinel://a:1,b:2/mymaster"), "redis+sentinel://mymaster@a:1,b:2")
        self.assertEqual(floodgate_url("memcached://a:1,b:2"), "memcached://a:1,b:2")
        self.assertEqual(floodgate_url("redis://h", timeout_ms=50), "redis://h?timeout_ms=50")

    def test_unknown_scheme(self):
        with self.assertRaisesRegex(limits.ConfigurationError, '^storage_string: unknown storage scheme "mongodb"'):
            limits.storage_from_string("mongodb://localhost")
        with self.assertRaisesRegex(limits.ConfigurationError, r"floodgate\.limits\.aio"):
            limits.storage_from_string("async+redis://localhost")

    def test_bad_option(self):
        with self.assertRaises(limits.ConfigurationError):
            limits.storage_from_string("memory://", bogus=1)

    def test_check(self):
        self.assertTrue(limits.storage_from_string("memory://").check())


class Strategies(unittest.TestCase):
    def setUp(self):
        self.clock = floodgate.ManualClock(1000.0)
        self.storage = limits.storage_from_string("memory://")

    def test_fixed_window_starts_at_the_first_hit(self):
        window = limits.FixedWindowRateLimiter(self.storage, clock=self.clock)
        item = limits.parse("2 per 10 seconds")
        self.clock.advance(3.25)
        self.assertTrue(window.hit(item, "k"))
        self.assertEqual(window.get_window_stats(item, "k"), (1013.25, 1))
        self.assertTrue(window.hit(item, "k"))
        self.assertFalse(window.hit(item, "k"))
        self.clock.advance(9.999)
        self.assertFalse(window.test(item, "k"))
        self.clock.advance(0.001)
        self.assertTrue(window.hit(item, "k"))

    def test_moving_window_reset_is_when_the_oldest_unit_leaves(self):
        window = limits.MovingWindowRateLimiter(self.storage, clock=self.clock)
        item = limits.parse("2/minute")
        window.hit(item, "k")
        self.clock.advance(10)
        window.hit(item, "k")
        stats = window.get_window_stats(item, "k")
        self.assertEqual(stats.remaining, 0)
        self.assertAlmostEqual(stats.reset_time, 1060.0, delta=1e-6)

    def test_algorithms_limits_lacks(self):
        for cls in (limits.TokenBucketRateLimiter, limits.GCRARateLimiter, limits.LeakyBucketRateLimiter):
            strategy = cls(self.storage, clock=self.clock)
            item = limits.parse("3/second")
            self.assertEqual([strategy.hit(item, cls.__name__) for _ in range(4)], [True] * 3 + [False])

    def test_negative_cost_is_refused_and_charges_nothing(self):
        for cls in (limits.FixedWindowRateLimiter, limits.MovingWindowRateLimiter,
                    limits.SlidingWindowCounterRateLimiter):
            strategy = cls(self.storage, clock=self.clock)
            item = limits.parse("5/minute")
            with self.assertRaisesRegex(floodgate.InvalidArgument, "^cost: "):
                strategy.hit(item, "neg", cost=-3)
            self.assertEqual(strategy.get_window_stats(item, "neg").remaining, 5, cls.__name__)

    def test_accepts_the_items_of_limits_itself(self):
        class Foreign:  # what a `limits` item offers
            amount = 1

            def get_expiry(self):
                return 60

            def key_for(self, *ids):
                return "foreign/" + "/".join(map(str, ids))

        window = limits.FixedWindowRateLimiter(self.storage, clock=self.clock)
        self.assertTrue(window.hit(Foreign(), "a"))
        self.assertFalse(window.hit(Foreign(), "a"))


class CallPath(unittest.TestCase):
    """hit and test are decided in C++: the key, the item's policy and the arguments' checks must
    be the ones of item.key_for and of the strategy's other methods."""

    ALL = (limits.FixedWindowRateLimiter, limits.MovingWindowRateLimiter,
           limits.SlidingWindowCounterRateLimiter, limits.TokenBucketRateLimiter,
           limits.GCRARateLimiter, limits.LeakyBucketRateLimiter)

    def setUp(self):
        self.clock = floodgate.ManualClock(1000.0)
        self.storage = limits.storage_from_string("memory://")

    def test_the_key_is_item_key_for(self):
        class Named(str):
            def __str__(self):
                return "shown"

        item = limits.parse("3/minute")
        idents = [("user", 42, b"x", 1.5), (), ("é", "a/b"), (Named("hidden"),), (True, None)]
        for cls in self.ALL:
            strategy = cls(self.storage, clock=self.clock)
            for ids in idents:
                self.assertTrue(strategy.hit(item, *ids, cost=2))
                # The Python path (get_window_stats → item.key_for) sees the C++ path's charge.
                self.assertEqual(strategy.get_window_stats(item, *ids).remaining, 1, (cls.__name__, ids))
                self.assertTrue(strategy.test(item, *ids))
                self.assertFalse(strategy.test(item, *ids, cost=2))
                strategy.clear(item, *ids)
                self.assertTrue(strategy.test(item, *ids, cost=3))

    def test_a_subclass_key_for_is_used(self):
        class Shared(limits.RateLimitItemPerMinute):
            def key_for(self, *identifiers):
                return "one-key-for-all"

        window = limits.FixedWindowRateLimiter(self.storage, clock=self.clock)
        item = Shared(2)
        self.assertTrue(window.hit(item, "a"))
        self.assertTrue(window.hit(item, "b"))
        self.assertFalse(window.hit(item, "c"))

    def test_bad_arguments_charge_nothing(self):
        item = limits.parse("5/minute")
        for cls in self.ALL:
            strategy = cls(self.storage, clock=self.clock)
            for call in (strategy.hit, strategy.test):
                for kwargs, error, text in (
                    ({"cost": -1}, floodgate.InvalidArgument, "^cost: "),
                    ({"cost": 2**53 + 1}, floodgate.InvalidArgument, "^cost: "),
                    ({"cost": 1.0}, TypeError, "^cost: expected an int"),
                    ({"cost": True}, TypeError, "^cost: expected an int"),
                    ({"cost": None}, TypeError, "^cost: expected an int"),
                    ({"weight": 1}, TypeError, "'weight'"),
                ):
                    with self.assertRaisesRegex(error, text):
                        call(item, "k", **kwargs)
                with self.assertRaisesRegex(TypeError, "item"):
                    call()
                with self.assertRaises(UnicodeDecodeError):
                    call(item, b"\xff")
                with self.assertRaises(AttributeError):
                    call(object(), "k")
            self.assertEqual(strategy.get_window_stats(item, "k").remaining, 5, cls.__name__)

    def test_many_items_beyond_the_cache(self):
        window = limits.FixedWindowRateLimiter(self.storage, clock=self.clock)
        items = [limits.RateLimitItemPerHour(n) for n in range(1, 5001)]
        self.assertTrue(all(window.hit(item, "k", cost=item.amount) for item in items))
        self.assertFalse(any(window.test(item, "k") for item in items))
        self.assertEqual(window.get_window_stats(items[-1], "k").remaining, 0)

    def test_an_item_parsed_on_every_call_counts_on_one_key(self):
        # New item objects each call (code that parses its limit strings per request): the cache
        # starts over past its bound, and every one of them still decides on the same key.
        window = limits.MovingWindowRateLimiter(self.storage, clock=self.clock)
        admitted = sum(window.hit(limits.parse("3000/hour"), "k") for _ in range(5000))
        self.assertEqual(admitted, 3000)
        self.assertEqual(window.get_window_stats(limits.parse("3000/hour"), "k").remaining, 0)


if __name__ == "__main__":
    unittest.main()
