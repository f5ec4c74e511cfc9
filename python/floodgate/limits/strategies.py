"""The strategies of `limits` (hit, test, get_window_stats, clear) on floodgate's engine."""

from __future__ import annotations

from typing import Callable, NamedTuple

from .. import _floodgate
from .items import RateLimitItem
from .storage import Storage


class WindowStats(NamedTuple):
    """When the limit resets (seconds since the epoch) and how many units remain."""

    reset_time: float
    remaining: int


class RateLimiter:
    """A strategy of `limits` over a floodgate storage.

    `storage`: a Storage from storage_from_string (or a floodgate.Storage). `clock`: a
    floodgate.ManualClock for tests (the system clock by default), the one keyword `limits` lacks.
    Items are this package's RateLimitItems or `limits`' own (anything with amount, get_expiry()
    and key_for()). Thread-safe; the GIL is released while a networked storage works (docs/python.md).

    hit(item, *identifiers, cost=1) -> bool: consumes `cost` if the limit allows it; True when it
    did. A refused hit consumes nothing.
    test(item, *identifiers, cost=1) -> bool: whether a hit of `cost` would be allowed now,
    consuming nothing.
    Both decide in C++ without a Python frame (the key built as item.key_for builds it); a bad cost
    raises floodgate.InvalidArgument or TypeError naming `cost`, and charges nothing.
    """

    hit: Callable[..., bool]
    test: Callable[..., bool]

    STRATEGY = ""
    ANCHOR = "clock"

    def __init__(self, storage: Storage | _floodgate.Storage, clock: _floodgate.Clock | None = None):
        self.storage = storage
        engine = storage.storage if isinstance(storage, Storage) else storage
        self._limiter = _floodgate.Limiter(engine, clock)
        self._clock = self._limiter.clock
        # hit and test are C functions (the class docstring); `_policy` is an item's policy, the
        # one they decide with.
        self.hit, self.test, self._policy = _floodgate.limits_calls(
            self._limiter, self.STRATEGY, self.ANCHOR, RateLimitItem.key_for
        )

    def get_window_stats(self, item, *identifiers) -> WindowStats:
        """(reset_time, remaining): when the key is back to full capacity, how many units fit."""
        d = self._limiter.stats(self._policy(item), item.key_for(*identifiers))
        return WindowStats(self._clock.now() + d.reset_after, d.remaining)

    def clear(self, item, *identifiers) -> None:
        """Forgets the key's state."""
        self._limiter.clear(self._policy(item), item.key_for(*identifiers))


class FixedWindowRateLimiter(RateLimiter):
    """A counter per window; as in `limits`, a key's window opens at its first hit."""

    STRATEGY = "fixed-window"
    ANCHOR = "first-hit"


class MovingWindowRateLimiter(RateLimiter):
    """The exact log of the last period. get_window_stats' reset_time is, as in `limits`, when the
    oldest unit in the window leaves it."""

    STRATEGY = "moving-window"

    def get_window_stats(self, item, *identifiers) -> WindowStats:
        policy, key = self._policy(item), item.key_for(*identifiers)
        d = self._limiter.stats(policy, key)
        now = self._clock.now()
        if d.remaining >= item.amount:
            return WindowStats(now + item.get_expiry(), d.remaining)
        # One unit more than fits waits for the oldest unit to leave: 1 µs after it is a period old.
        later = self._limiter.test(policy, key, d.remaining + 1)
        return WindowStats(now + later.retry_after - 1e-6, d.remaining)


class SlidingWindowCounterRateLimiter(RateLimiter):
    """The weighted count of two clock-aligned buckets. get_window_stats' reset_time is when the
    next unit frees (`limits` estimates it from its bucket counters)."""

    STRATEGY = "sliding-window-counter"

    def get_window_stats(self, item, *identifiers) -> WindowStats:
        policy, key = self._policy(item), item.key_for(*identifiers)
        d = self._limiter.stats(policy, key)
        now = self._clock.now()
        if d.remaining >= item.amount or d.reset_after == 0:
            return WindowStats(now, d.remaining)
        later = self._limiter.test(policy, key, d.remaining + 1)
        return WindowStats(now + min(later.retry_after, d.reset_after), d.remaining)


class TokenBucketRateLimiter(RateLimiter):
    """A bucket of `amount` tokens refilled at amount per period (not in `limits`)."""

    STRATEGY = "token-bucket"


class GCRARateLimiter(RateLimiter):
    """The generic cell rate algorithm: amount per period, a burst of `amount` (not in `limits`)."""

    STRATEGY = "gcra"


class LeakyBucketRateLimiter(RateLimiter):
    """A leaky bucket that refuses on overflow (not in `limits`)."""

    STRATEGY = "leaky-bucket"


STRATEGIES: dict[str, type[RateLimiter]] = {
    "fixed-window": FixedWindowRateLimiter,
    "moving-window": MovingWindowRateLimiter,
    "sliding-window-counter": SlidingWindowCounterRateLimiter,
    "token-bucket": TokenBucketRateLimiter,
    "gcra": GCRARateLimiter,
    "leaky-bucket": LeakyBucketRateLimiter,
}
