"""The API of the `limits` package on floodgate's engine: ``import floodgate.limits as limits``.

    import floodgate.limits as limits
    storage = limits.storage_from_string("redis://localhost:6379")
    window = limits.MovingWindowRateLimiter(storage)
    one_per_second = limits.parse("1/second")
    window.hit(one_per_second, "user", "42")

`parse`, `parse_many`, the RateLimitItemPer* classes, `storage_from_string`, the strategies of
`limits` (fixed window starting at a key's first hit, moving window, sliding window counter) and
three it lacks (token bucket, GCRA, leaky bucket), each with hit/test/get_window_stats/clear and a
`clock=` keyword for tests. docs/python.md says where a decision differs from `limits` and why.
"""

from ..errors import InvalidArgument
from .items import (
    GRANULARITIES,
    Granularity,
    RateLimitItem,
    RateLimitItemPerDay,
    RateLimitItemPerHour,
    RateLimitItemPerMinute,
    RateLimitItemPerMonth,
    RateLimitItemPerSecond,
    RateLimitItemPerYear,
    parse,
    parse_many,
)
from .storage import ConfigurationError, Storage, storage_from_string
from .strategies import (
    STRATEGIES,
    FixedWindowRateLimiter,
    GCRARateLimiter,
    LeakyBucketRateLimiter,
    MovingWindowRateLimiter,
    RateLimiter,
    SlidingWindowCounterRateLimiter,
    TokenBucketRateLimiter,
    WindowStats,
)

__all__ = [
    "ConfigurationError", "FixedWindowRateLimiter", "GCRARateLimiter", "GRANULARITIES",
    "Granularity", "InvalidArgument", "LeakyBucketRateLimiter", "MovingWindowRateLimiter",
    "RateLimitItem", "RateLimitItemPerDay", "RateLimitItemPerHour", "RateLimitItemPerMinute",
    "RateLimitItemPerMonth", "RateLimitItemPerSecond", "RateLimitItemPerYear", "RateLimiter",
    "STRATEGIES", "SlidingWindowCounterRateLimiter", "Storage", "TokenBucketRateLimiter",
    "WindowStats", "parse", "parse_many", "storage_from_string",
]
