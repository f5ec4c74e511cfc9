#!/usr/bin/env python3
"""check_dashboard.py fails on a copy of the dashboard with a series /metrics does not render, and
on one with an expression that does not parse; it passes on the dashboard as it is.

  tests/monitoring/check_dashboard_selftest.py SOURCE_DIR
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(src, path):
    return subprocess.run([sys.executable, os.path.join(HERE, "check_dashboard.py"), src, path],
                          capture_output=True, text=True)


def main():
    src = sys.argv[1]
    path = os.path.join(src, "packaging/monitoring/grafana-dashboard.json")
    failures = 0
    r = run(src, path)
    if r.returncode != 0:
        print("FAIL the dashboard as it is does not pass:\n" + r.stdout + r.stderr)
        failures += 1
    breaks = [("floodgate_decisions_total", "floodgate_decision_total", "floodgate_decision_total is not a series"),
              ("sum by (result) (rate(", "sum by (result) (rate((", "promtool does not parse")]
    for old, new, expected in breaks:
        dashboard = json.load(open(path, encoding="utf-8"))
        target = next(t for p in dashboard["panels"] for t in p.get("targets", []) if old in t["expr"])
        target["expr"] = target["expr"].replace(old, new, 1)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(dashboard, f)
        r = run(src, f.name)
        os.unlink(f.name)
        if r.returncode == 0 or expected not in r.stdout:
            print(f"FAIL {new!r} for {old!r}: expected a failure with {expected!r}, got:\n{r.stdout}{r.stderr}")
            failures += 1
    print(f"{len(breaks) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
