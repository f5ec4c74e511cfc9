"""floodgate: rate limiting with floodgate's C++ engine, in-process.

    import floodgate
    limiter = floodgate.Limiter(floodgate.open_storage("memory://"))
    api = floodgate.Policy("10/second; 100/minute", "sliding-window-counter")
    decision = limiter.hit(api, "user-42")
    if not decision:
        retry_in = decision.retry_after

One algorithm per strategy, applied atomically by the storage (memory, Redis, Redis Cluster,
Sentinel, TLS, memcached), the same code as the floodgate service. Every object is safe to share
between threads, and every call that touches a storage or waits releases the GIL.
`floodgate.limits` offers the API of the `limits` package on this engine (docs/python.md).
"""

from . import errors
from ._floodgate import (
    Clock,
    Decision,
    Lease,
    Limiter,
    ManualClock,
    Policy,
    Reservation,
    Storage,
    open_storage,
    system_clock,
)
from .errors import (
    AlreadyExists,
    Cancelled,
    FailedPrecondition,
    FloodgateError,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    StorageError,
    Timeout,
    Unsupported,
)

STRATEGIES = (
    "fixed-window",
    "moving-window",
    "sliding-window-counter",
    "token-bucket",
    "leaky-bucket",
    "gcra",
    "concurrency",
)

__all__ = [
    "AlreadyExists", "Cancelled", "Clock", "Decision", "FailedPrecondition", "FloodgateError",
    "InvalidArgument", "Lease", "Limiter", "ManualClock", "NotFound", "Policy", "Reservation",
    "ResourceExhausted", "STRATEGIES", "Storage", "StorageError", "Timeout", "Unsupported",
    "errors", "open_storage", "system_clock",
]
