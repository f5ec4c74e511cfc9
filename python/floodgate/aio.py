"""floodgate for asyncio: the Limiter's calls as coroutines that never block the event loop.

    limiter = floodgate.aio.Limiter(floodgate.open_storage("redis://localhost"))
    decision = await limiter.hit(api, "user-42")
    await limiter.acquire(api, "user-42", timeout=2.0)

Each call runs on a thread of `executor` (the loop's default executor when None) with the GIL
released while floodgate works, so the loop goes on serving other tasks during a storage round
trip or a wait. Safe to share between tasks and threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from typing import Optional, Union

from . import _floodgate


class Limiter:
    """The asyncio face of floodgate.Limiter: the same methods, awaited."""

    def __init__(
        self,
        storage: Union[_floodgate.Storage, str, _floodgate.Limiter],
        clock: Optional[_floodgate.Clock] = None,
        executor: Optional[concurrent.futures.Executor] = None,
    ):
        if isinstance(storage, _floodgate.Limiter):
            self.sync = storage
        else:
            self.sync = _floodgate.Limiter(storage, clock)
        self._executor = executor

    async def _run(self, method, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(method, *args, **kwargs))

    async def hit(self, policy, key, cost: int = 1) -> _floodgate.Decision:
        """Limiter.hit, awaited."""
        return await self._run(self.sync.hit, policy, key, cost)

    async def test(self, policy, key, cost: int = 1) -> _floodgate.Decision:
        """Limiter.test, awaited."""
        return await self._run(self.sync.test, policy, key, cost)

    async def stats(self, policy, key) -> _floodgate.Decision:
        """Limiter.stats, awaited."""
        return await self._run(self.sync.stats, policy, key)

    async def clear(self, policy, key) -> None:
        """Limiter.clear, awaited."""
        await self._run(self.sync.clear, policy, key)

    async def acquire(self, policy, key, cost: int = 1, *, timeout: float) -> _floodgate.Decision:
        """Limiter.acquire, awaited: the wait holds a thread of the executor, never the loop."""
        return await self._run(self.sync.acquire, policy, key, cost, timeout=timeout)

    async def reserve(self, policy, key, estimate: int, *, id: str = "", ttl: float = 60.0):
        """Limiter.reserve, awaited (settle the Reservation with `await limiter.settle_reservation`)."""
        return await self._run(self.sync.reserve, policy, key, estimate, id=id, ttl=ttl)

    async def settle_reservation(self, reservation, actual: int) -> _floodgate.Decision:
        """Reservation.settle, awaited."""
        return await self._run(reservation.settle, actual)
