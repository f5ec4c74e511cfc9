"""Flask-Limiter (Debian's python3-flask-limiter 3.3) deciding through floodgate after its one-line
switch: `from floodgate.limits.flask import Limiter` instead of `from flask_limiter import Limiter`."""

import unittest

import flask
from flask_limiter.util import get_remote_address

from floodgate.limits.flask import Limiter
import floodgate.limits.strategies


def app_with(strategy, **options):
    app = flask.Flask(__name__)
    app.config["RATELIMIT_HEADERS_ENABLED"] = True
    limiter = Limiter(get_remote_address, app=app, strategy=strategy, storage_uri="memory://", **options)

    @app.route("/")
    @limiter.limit("3 per minute")
    def index():
        return "ok"

    return app, limiter


class FlaskLimiter(unittest.TestCase):
    def test_429_after_the_limit_with_headers(self):
        for strategy in ("fixed-window", "moving-window"):
            app, limiter = app_with(strategy)
            self.assertIsInstance(limiter.limiter, floodgate.limits.strategies.RateLimiter)
            client = app.test_client()
            answers = [client.get("/") for _ in range(4)]
            self.assertEqual([a.status_code for a in answers], [200, 200, 200, 429], strategy)
            first, last = answers[0], answers[3]
            self.assertEqual(first.headers["X-RateLimit-Limit"], "3")
            self.assertEqual(first.headers["X-RateLimit-Remaining"], "2")
            self.assertEqual(answers[2].headers["X-RateLimit-Remaining"], "0")
            self.assertEqual(last.headers["X-RateLimit-Remaining"], "0")
            reset = int(first.headers["X-RateLimit-Reset"])
            import time

            self.assertLessEqual(abs(reset - (time.time() + 60)), 2, strategy)
            self.assertIn(int(last.headers["Retry-After"]), range(58, 61), strategy)

    def test_storage_of_the_uri_is_floodgates(self):
        _, limiter = app_with("fixed-window")
        self.assertIsInstance(limiter._storage, floodgate.limits.Storage)


if __name__ == "__main__":
    unittest.main()
