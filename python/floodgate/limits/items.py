"""Rate limit items in the notation of `limits`: "10/minute", "5 per 2 seconds"."""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple

from ..errors import InvalidArgument


class Granularity(NamedTuple):
    """A unit of time: its length in seconds and its name."""

    seconds: int
    name: str


_UNITS = {
    "second": Granularity(1, "second"),
    "minute": Granularity(60, "minute"),
    "hour": Granularity(3600, "hour"),
    "day": Granularity(86400, "day"),
    "month": Granularity(30 * 86400, "month"),  # as `limits` counts them: 30 days
    "year": Granularity(360 * 86400, "year"),  # and 12 such months
}


class RateLimitItem:
    """`amount` per `multiples` units of GRANULARITY, counted under `namespace`.

    The key of a limit for some identifiers is
    ``namespace/identifier/…/amount/multiples/unit``, the identifiers joined with ``str()``, as
    `limits` builds it, so keys mean the same in both. Immutable, hashable, safe to share.
    """

    __slots__ = ("namespace", "amount", "multiples", "_suffix")
    GRANULARITY: Granularity

    def __init__(self, amount: int, multiples: int | None = 1, namespace: str = "LIMITER"):
        self.namespace = namespace
        self.amount = _positive(amount, "amount")
        self.multiples = _positive(multiples or 1, "multiples")
        self._suffix = f"{self.amount}/{self.multiples}/{self.GRANULARITY.name}"

    @classmethod
    def check_granularity_string(cls, granularity_string: str) -> bool:
        """Whether `granularity_string` ("minute", "minutes") names this item's unit."""
        name = granularity_string.lower()
        return name in (cls.GRANULARITY.name, cls.GRANULARITY.name + "s")

    def get_expiry(self) -> int:
        """The limit's period in seconds."""
        return self.GRANULARITY.seconds * self.multiples

    def key_for(self, *identifiers: bytes | str | int | float) -> str:
        """The storage key of this limit for `identifiers` (bytes decoded, others with str(), as
        `limits` makes them: a str subclass's own __str__ counts). The strategies build the same
        key in C++."""
        parts = [i if type(i) is str else i.decode() if isinstance(i, bytes) else str(i) for i in identifiers]
        return "/".join((self.namespace, *parts, self._suffix))

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, RateLimitItem)
            and (self.amount, self.multiples, self.GRANULARITY)
            == (other.amount, other.multiples, other.GRANULARITY)
        )

    def __lt__(self, other: RateLimitItem) -> bool:
        return self.GRANULARITY.seconds < other.GRANULARITY.seconds

    def __hash__(self) -> int:
        return hash((self.namespace, self.amount, self.multiples, self.GRANULARITY))

    def __repr__(self) -> str:
        return f"{self.amount} per {self.multiples} {self.GRANULARITY.name}"


def _positive(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(value)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise InvalidArgument(f"{argument}: expected a positive integer, got {value!r}") from None
    if value < 1:
        raise InvalidArgument(f"{argument}: expected a positive integer, got {value!r}")
    return value


class RateLimitItemPerSecond(RateLimitItem):
    """`amount` per `multiples` seconds."""

    GRANULARITY = _UNITS["second"]


class RateLimitItemPerMinute(RateLimitItem):
    """`amount` per `multiples` minutes."""

    GRANULARITY = _UNITS["minute"]


class RateLimitItemPerHour(RateLimitItem):
    """`amount` per `multiples` hours."""

    GRANULARITY = _UNITS["hour"]


class RateLimitItemPerDay(RateLimitItem):
    """`amount` per `multiples` days."""

    GRANULARITY = _UNITS["day"]


class RateLimitItemPerMonth(RateLimitItem):
    """`amount` per `multiples` months of 30 days."""

    GRANULARITY = _UNITS["month"]


class RateLimitItemPerYear(RateLimitItem):
    """`amount` per `multiples` years of 360 days."""

    GRANULARITY = _UNITS["year"]


GRANULARITIES = {
    cls.GRANULARITY.name: cls
    for cls in (
        RateLimitItemPerSecond,
        RateLimitItemPerMinute,
        RateLimitItemPerHour,
        RateLimitItemPerDay,
        RateLimitItemPerMonth,
        RateLimitItemPerYear,
    )
}

_ONE = re.compile(
    r"\s*(\d+)\s*(?:/|\s+per\s+)\s*(?:(\d+)\s*)?(second|minute|hour|day|month|year)s?\s*",
    re.IGNORECASE,
)
_SEPARATORS = re.compile(r"[,;|]")


def _parse_one(text: str, whole: str) -> RateLimitItem:
    match = _ONE.fullmatch(text)
    if match is None:
        raise InvalidArgument(
            f'limit_string: cannot parse "{whole}": expected "N/unit" or "N per [M] unit[s]" '
            "(unit: second, minute, hour, day, month, year), several joined by , ; or |"
        )
    amount, multiples, unit = match.groups()
    return GRANULARITIES[unit.lower()](int(amount), int(multiples) if multiples else 1)


def parse_many(limit_string: str) -> list[RateLimitItem]:
    """The items of "1/second; 10 per minute" (separated by , ; or |).

    Raises floodgate.InvalidArgument (a ValueError) naming `limit_string` and quoting it.
    """
    if not isinstance(limit_string, str):
        raise InvalidArgument(f"limit_string: expected a str, got {type(limit_string).__name__}")
    parts: Iterable[str] = _SEPARATORS.split(limit_string)
    return [_parse_one(part, limit_string) for part in parts]


def parse(limit_string: str) -> RateLimitItem:
    """The first item of `limit_string` (parse_many)."""
    return parse_many(limit_string)[0]
