"""The exceptions of floodgate: every error of the C++ library arrives as one of these, with its
message (a bad rate string quotes it, a bad argument is named)."""


class FloodgateError(Exception):
    """The base of floodgate's exceptions."""


class InvalidArgument(FloodgateError, ValueError):
    """An argument the library refuses (a rate string that does not parse, a negative cost, an
    unknown storage scheme or option); nothing was charged."""


class StorageError(FloodgateError):
    """The storage failed (unreachable, timed out, an error reply) where no fail mode decides:
    opening a storage, clear, probe, settle. A decision never raises it: the policy's fail mode
    decides and the decision says `degraded`."""


class NotFound(FloodgateError, LookupError):
    """A lease that is not outstanding (released, or expired)."""


class AlreadyExists(FloodgateError):
    """A reservation id already known for the key."""


class ResourceExhausted(FloodgateError):
    """A bound of the storage the request would pass (max_keys, max_reservations)."""


class FailedPrecondition(FloodgateError):
    """A call that does not fit the object's state (a lease that holds nothing)."""


class Unsupported(FloodgateError, NotImplementedError):
    """A feature the storage does not have."""


class Cancelled(FloodgateError):
    """A wait cancelled by a shutdown."""


class Timeout(FloodgateError, TimeoutError):
    """No slot within the timeout of Limiter.acquire or Limiter.lease (answered at once when the
    slot cannot come before the deadline)."""
