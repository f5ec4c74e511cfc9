"""floodgate.aio and floodgate.limits.aio: coroutines that never block the event loop."""

import asyncio
import unittest

import floodgate
import floodgate.aio
import floodgate.limits as limits
import floodgate.limits.aio as limits_aio


class Aio(unittest.TestCase):
    def test_acquire_waits_without_blocking_the_loop(self):
        async def main():
            clock = floodgate.ManualClock(1000.0)
            limiter = floodgate.aio.Limiter("memory://", clock)
            p = floodgate.Policy("1/second", "gcra")
            self.assertTrue(await limiter.hit(p, "k"))
            waiting = asyncio.ensure_future(limiter.acquire(p, "k", timeout=5.0))
            # This coroutine runs while the acquisition waits: the loop is free.
            while clock.sleepers() == 0:
                await asyncio.sleep(0.001)
            self.assertFalse(waiting.done())
            clock.advance(1.0)
            return await asyncio.wait_for(waiting, 10)

        self.assertTrue(asyncio.run(main()).allowed)

    def test_limits_aio_strategies(self):
        async def main():
            clock = floodgate.ManualClock(1000.0)
            storage = limits_aio.storage_from_string("async+memory://")
            window = limits_aio.MovingWindowRateLimiter(storage, clock=clock)
            item = limits.parse("2/minute")
            hits = [await window.hit(item, "a") for _ in range(3)]
            return hits, await window.get_window_stats(item, "a")

        hits, stats = asyncio.run(main())
        self.assertEqual(hits, [True, True, False])
        self.assertEqual(stats.remaining, 0)


if __name__ == "__main__":
    unittest.main()
