"""Flask-Limiter on floodgate's engine, a one-line switch:

    from floodgate.limits.flask import Limiter      # was: from flask_limiter import Limiter

Everything else stays: the same arguments and configuration (RATELIMIT_STORAGE_URI with `limits`'
URLs, RATELIMIT_STRATEGY: fixed-window, moving-window, and with floodgate also
sliding-window-counter, token-bucket, gcra, leaky-bucket), the same decorators, headers and 429s.
Flask-Limiter's decisions then go through floodgate.limits' strategies on a floodgate storage
opened from the same URL. Its in-memory fallback, when configured, stays `limits`' own.
"""

from __future__ import annotations

import flask
import flask_limiter

from .storage import ConfigurationError, storage_from_string
from .strategies import STRATEGIES


class Limiter(flask_limiter.Limiter):
    """flask_limiter.Limiter whose storage and strategy are floodgate's (module docstring)."""

    def init_app(self, app: flask.Flask) -> None:
        config = app.config
        uri = self._storage_uri or config.get("RATELIMIT_STORAGE_URI") or "memory://"
        strategy = self._strategy or config.get("RATELIMIT_STRATEGY") or "fixed-window"
        if strategy not in STRATEGIES:
            raise ConfigurationError(f'strategy: unknown strategy "{strategy}": expected one of {", ".join(STRATEGIES)}')
        # Flask-Limiter opens `limits`' storage and strategy; they are replaced below, so it opens
        # only the in-memory ones (a Redis URL is opened once, by floodgate).
        self._storage_uri, self._strategy = "memory://", "fixed-window"
        try:
            super().init_app(app)
        finally:
            self._storage_uri, self._strategy = uri, strategy
        if not self.enabled:
            return
        self._storage = storage_from_string(uri, **self._storage_options)
        self._limiter = STRATEGIES[strategy](self._storage)
