"""The asyncio API of `limits` (limits.aio) on floodgate's engine:

    import floodgate.limits.aio as aio
    storage = aio.storage_from_string("async+redis://localhost:6379")
    window = aio.MovingWindowRateLimiter(storage)
    await window.hit(item, "user", 42)

The strategies' methods are coroutines that run floodgate.limits' strategies on a thread of the
loop's default executor, with the GIL released while floodgate works: the event loop never waits
for a storage.
"""

from __future__ import annotations

import asyncio
import functools

from . import strategies as _sync
from .storage import ConfigurationError, Storage, storage_from_string as _storage_from_string
from .strategies import WindowStats


def storage_from_string(storage_string: str, **options: object) -> Storage:
    """The storage of an `async+…` URL of `limits` (async+memory://, async+redis://, …); a URL
    without the prefix is taken as it is."""
    if isinstance(storage_string, str) and storage_string.startswith("async+"):
        storage_string = storage_string[len("async+") :]
    return _storage_from_string(storage_string, **options)


class RateLimiter:
    """An awaitable floodgate.limits strategy (the synchronous one is `sync`)."""

    SYNC: type[_sync.RateLimiter] = _sync.RateLimiter

    def __init__(self, storage: Storage, clock=None):
        self.sync = self.SYNC(storage, clock=clock)
        self.storage = storage

    async def _run(self, method, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, functools.partial(method, *args, **kwargs))

    async def hit(self, item, *identifiers, cost: int = 1) -> bool:
        return await self._run(self.sync.hit, item, *identifiers, cost=cost)

    async def test(self, item, *identifiers, cost: int = 1) -> bool:
        return await self._run(self.sync.test, item, *identifiers, cost=cost)

    async def get_window_stats(self, item, *identifiers) -> WindowStats:
        return await self._run(self.sync.get_window_stats, item, *identifiers)

    async def clear(self, item, *identifiers) -> None:
        await self._run(self.sync.clear, item, *identifiers)


def _async(sync_cls):
    return type(sync_cls.__name__, (RateLimiter,), {"SYNC": sync_cls, "__doc__": sync_cls.__doc__})


FixedWindowRateLimiter = _async(_sync.FixedWindowRateLimiter)
MovingWindowRateLimiter = _async(_sync.MovingWindowRateLimiter)
SlidingWindowCounterRateLimiter = _async(_sync.SlidingWindowCounterRateLimiter)
TokenBucketRateLimiter = _async(_sync.TokenBucketRateLimiter)
GCRARateLimiter = _async(_sync.GCRARateLimiter)
LeakyBucketRateLimiter = _async(_sync.LeakyBucketRateLimiter)

STRATEGIES = {
    name: cls
    for name, cls in (
        ("fixed-window", FixedWindowRateLimiter),
        ("moving-window", MovingWindowRateLimiter),
        ("sliding-window-counter", SlidingWindowCounterRateLimiter),
        ("token-bucket", TokenBucketRateLimiter),
        ("gcra", GCRARateLimiter),
        ("leaky-bucket", LeakyBucketRateLimiter),
    )
}

__all__ = [
    "ConfigurationError", "FixedWindowRateLimiter", "GCRARateLimiter", "LeakyBucketRateLimiter",
    "MovingWindowRateLimiter", "RateLimiter", "STRATEGIES", "SlidingWindowCounterRateLimiter",
    "Storage", "TokenBucketRateLimiter", "WindowStats", "storage_from_string",
]
