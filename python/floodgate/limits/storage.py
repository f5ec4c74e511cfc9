"""storage_from_string: the storage URLs of `limits`, opened as floodgate storages."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

from .. import _floodgate
from ..errors import InvalidArgument, StorageError


class ConfigurationError(InvalidArgument):
    """A storage URL or option floodgate.limits cannot use (the name `limits` gives it)."""


# limits' scheme → floodgate's. Schemes floodgate itself names (redis-cluster://, redis+unix://)
# are taken as they are.
_SCHEMES = {
    "memory": "memory",
    "redis": "redis",
    "rediss": "rediss",
    "redis+unix": "redis+unix",
    "redis+cluster": "redis-cluster",
    "rediss+cluster": "rediss-cluster",
    "redis-cluster": "redis-cluster",
    "rediss-cluster": "rediss-cluster",
    "redis+sentinel": "redis+sentinel",
    "rediss+sentinel": "rediss+sentinel",
    "memcached": "memcached",
}


def floodgate_url(storage_string: str, **options: object) -> str:
    """The floodgate storage URL of a `limits` storage URL, `options` added as its query."""
    if not isinstance(storage_string, str):
        raise ConfigurationError(f"storage_string: expected a str, got {type(storage_string).__name__}")
    parts = urlsplit(storage_string)
    scheme = _SCHEMES.get(parts.scheme)
    if scheme is None:
        hint = " (async+ URLs are for floodgate.limits.aio.storage_from_string)" if parts.scheme.startswith("async+") else ""
        raise ConfigurationError(
            f'storage_string: unknown storage scheme "{parts.scheme}" in "{storage_string}"{hint}: '
            "expected memory, redis, rediss, redis+unix, redis+cluster, redis+sentinel or memcached"
        )
    rest = storage_string[len(parts.scheme) + 3 :] if "://" in storage_string else ""
    if scheme.endswith("+sentinel") and parts.path.strip("/") and "@" not in parts.netloc:
        # limits: redis+sentinel://host:port[,host:port]/service; floodgate: service@host:port,…
        rest = f"{parts.path.strip('/')}@{parts.netloc}" + (f"?{parts.query}" if parts.query else "")
    query = "&".join(f"{quote(str(k))}={quote(str(v))}" for k, v in options.items())
    if query:
        rest += ("&" if "?" in rest else "?") + query
    return f"{scheme}://{rest}"


class Storage:
    """A floodgate storage opened from a `limits` storage URL (storage_from_string).

    Thread-safe: share one between strategies and threads. `storage` is the floodgate.Storage.
    """

    def __init__(self, uri: str, **options: object):
        self.url = floodgate_url(uri, **options)
        try:
            self.storage = _floodgate.open_storage(self.url)
        except InvalidArgument as e:
            raise ConfigurationError(str(e)) from None

    def check(self) -> bool:
        """Whether the storage's servers answer (one round trip)."""
        try:
            self.storage.probe()
        except StorageError:
            return False
        return True

    def __repr__(self) -> str:
        return f"floodgate.limits.Storage({self.url!r})"


def storage_from_string(storage_string: str, **options: object) -> Storage:
    """Opens the storage of a `limits` URL: memory://, redis://, rediss://, redis+unix://,
    redis+cluster://, redis+sentinel://host:port/service, memcached://host:port[,host:port].
    `options` become options of floodgate's URL (docs/redis.md lists them).

    Raises ConfigurationError (a floodgate.InvalidArgument, a ValueError) naming `storage_string`
    for an unknown scheme or option; floodgate.StorageError when a server cannot be reached.
    """
    return Storage(storage_string, **options)
