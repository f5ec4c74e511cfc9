#!/usr/bin/env python3
"""packaging/monitoring/grafana-dashboard.json: every PromQL expression of its panels parses
(promtool check rules, on a rules file that records each one, Grafana's variables given values)
and reads only series that floodgate's /metrics renders (the names in the source's renderers).

  tests/monitoring/check_dashboard.py SOURCE_DIR [DASHBOARD]

Exit 1 naming each panel whose expression does not parse or reads an unknown series.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

# Grafana's variables and macros, as a query runs them.
SUBSTITUTIONS = [("$__rate_interval", "5m"), ("$__interval", "1m"), ("$__range", "1h"),
                 ("$job", ".*"), ("$instance", ".*")]
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def exported(src):
    """The series names /metrics renders: literal names in src/, and the RLS counters' family
    (floodgate_rls_{}_total over its kNames)."""
    names = set()
    for root, _, files in os.walk(os.path.join(src, "src")):
        for f in files:
            if not f.endswith((".cpp", ".hpp")):
                continue
            text = open(os.path.join(root, f), encoding="utf-8").read()
            names.update(re.findall(r'"(floodgate_[a-z_]*[a-z])"', text))
            if "floodgate_rls_{}_total" in text:
                m = re.search(r"kNames\[\] = \{([^}]*)\}", text)
                names.update(f"floodgate_rls_{n}_total" for n in re.findall(r'"([a-z_]+)"', m.group(1)))
    return names


def expressions(dashboard):
    def walk(panels):
        for p in panels:
            yield from walk(p.get("panels", []))
            for t in p.get("targets", []):
                if t.get("expr"):
                    yield p.get("title", "?"), t["refId"], t["expr"]
    return list(walk(dashboard["panels"]))


def substitute(expr):
    for old, new in SUBSTITUTIONS:
        expr = expr.replace(old, new)
    return expr


def check(src, path):
    errors = []
    dashboard = json.load(open(path, encoding="utf-8"))
    exprs = expressions(dashboard)
    if not exprs:
        return [f"{path}: no panel has a PromQL expression"]
    known = exported(src)
    for title, ref, expr in exprs:
        if "$" in substitute(expr):
            errors.append(f"panel {title!r} {ref}: a Grafana variable this check does not know: {expr}")
        for name in sorted(set(re.findall(r"\bfloodgate_[a-z_]+", expr))):
            base = name
            for suffix in HISTOGRAM_SUFFIXES:
                if name.endswith(suffix) and name[: -len(suffix)] in known:
                    base = name[: -len(suffix)]
            if base not in known:
                errors.append(f"panel {title!r} {ref}: {name} is not a series floodgate's /metrics renders")
    # Each expression as a recording rule: promtool parses it (and names the rule that fails).
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as rules:
        rules.write("groups:\n  - name: dashboard\n    rules:\n")
        for i, (title, ref, expr) in enumerate(exprs):
            rules.write(f"      - record: dashboard:panel_{i}\n        expr: {json.dumps(substitute(expr))}\n")
    try:
        r = subprocess.run(["promtool", "check", "rules", rules.name], capture_output=True, text=True)
        if r.returncode != 0:
            bad = set(int(i) for i in re.findall(r"dashboard:panel_(\d+)", r.stdout + r.stderr))
            for i in sorted(bad) or range(len(exprs)):
                title, ref, expr = exprs[i]
                errors.append(f"panel {title!r} {ref}: promtool does not parse {expr}")
            errors.append("promtool: " + (r.stdout + r.stderr).strip().replace("\n", " | "))
    finally:
        os.unlink(rules.name)
    return errors


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(src, "packaging/monitoring/grafana-dashboard.json")
    errors = check(src, path)
    for e in errors:
        print("FAIL", e)
    if not errors:
        print(f"dashboard: {len(expressions(json.load(open(path))))} expressions parse and read served series")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
