#!/usr/bin/env python3
"""Writes a realistic nginx access log for `floodgate simulate`: a day (or the span given) of
traffic whose rate follows the time of day, from USERS clients with skewed rates (a few heavy,
most light; one in eight on IPv6, some /64s shared by several addresses), a scraper that goes far
over any sensible limit, and bots that come in bursts. Each line is nginx's "combined" format plus
"$http_x_api_key" (the log_format of docs and tests/integration/nginx/simulate.sh).

  make_log.py REQUESTS OUT [--users N] [--seconds S] [--seed N] [--start EPOCH]
"""
import argparse
import math
import random

p = argparse.ArgumentParser()
p.add_argument("requests", type=int)
p.add_argument("out")
p.add_argument("--users", type=int, default=5000)
p.add_argument("--seconds", type=float, default=86400.0)
p.add_argument("--seed", type=int, default=7)
p.add_argument("--start", type=int, default=1795737600)  # 2026-11-27 00:00:00 UTC
a = p.parse_args()
rng = random.Random(a.seed)

MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
PATHS = ["/", "/api/items", "/api/items/42", "/api/search?q=lamp", "/login", "/static/app.js", "/api/cart"]
AGENTS = ["Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_0)", "curl/8.5.0",
          "python-requests/2.31"]


def address(i):
    if i % 8 == 0:  # IPv6: four addresses share each /64
        return "2001:db8:%x:%x::%x" % (i // 512, (i // 4) % 128, 1 + i % 4)
    return "%d.%d.%d.%d" % (10 + i % 200, (i // 200) % 250, (i // 50000) % 250, 1 + i % 250)


# Weights: a Zipf-like tail of users, one scraper at ~8% of all traffic, three bots at ~1% each.
users = [address(i) for i in range(a.users)]
weights = [1.0 / (1 + i) ** 0.8 for i in range(a.users)]
total = sum(weights)
keys = users + ["198.51.100.66", "203.0.113.7", "203.0.113.8", "203.0.113.9"]
weights += [total * 0.09, total * 0.011, total * 0.011, total * 0.011]
api_keys = ["key-%04d" % (i % 900) for i in range(len(keys))]
cum = []
acc = 0.0
for w in weights:
    acc += w
    cum.append(acc)


def rate_at(t):  # relative intensity by the hour of day: low at night, a peak in the afternoon
    h = (t / 3600.0) % 24
    return 0.25 + 0.75 * math.exp(-((h - 15) ** 2) / 18)


# Arrival times: a Poisson process thinned by the day's shape, scaled to the wanted count.
mean = sum(rate_at(s) for s in range(0, 86400, 60)) / 1440
base = a.requests / a.seconds / mean
stamp_cache = {}
with open(a.out, "w", buffering=1 << 20) as out:
    t = 0.0
    n = 0
    batch = 4096
    while n < a.requests:
        picks = rng.choices(range(len(keys)), cum_weights=cum, k=batch)
        for k in picks:
            while True:
                t += rng.expovariate(base)
                if rng.random() * 1.0 <= rate_at(t):
                    break
            sec = a.start + int(t)
            stamp = stamp_cache.get(sec)
            if stamp is None:
                d = __import__("time").gmtime(sec)
                stamp = "%02d/%s/%04d:%02d:%02d:%02d +0000" % (d.tm_mday, MONTHS[d.tm_mon - 1], d.tm_year,
                                                               d.tm_hour, d.tm_min, d.tm_sec)
                stamp_cache = {sec: stamp}
            path = PATHS[k % len(PATHS)]
            out.write('%s - - [%s] "GET %s HTTP/1.1" 200 %d "-" "%s" "%s"\n' % (
                keys[k], stamp, path, 200 + k % 3000, AGENTS[k % len(AGENTS)], api_keys[k]))
            n += 1
            if n >= a.requests:
                break
