#!/usr/bin/env python3
"""The docs' lists match the product: strategies, endpoints, rate-notation forms and units.

  tests/docs/check_lists.py SOURCE_DIR FLOODGATE_BINARY

- Strategies: read from `floodgate replay --help` (its --strategy line). README.md and
  docs/algorithms.md must say how many there are ("seven algorithms"), README.md must name each,
  and the `strategy` row of docs/configuration.md must list exactly them.
- Endpoints: read from the service's route table (src/server/api/service.cpp, kRoutes). Every
  route must be a row of docs/http-api.md's endpoint table and an operation of docs/openapi.yaml
  (which must have no other), every /v1/ route must appear in
  README.md, and every endpoint that README.md, docs/configuration.md or docs/http-api.md cites
  must be a route.
- Rate notation: each form below is checked against the binary (it must accept it), and README.md's
  "Rate notation" section must show it; the units are read from the binary's own error message
  for an unknown unit, and that section must name each.
Exit 1 with one line per mismatch.
"""
import os
import re
import subprocess
import sys

NUMBERS = {"four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
# How README.md names each strategy in prose.
PROSE = {
    "fixed-window": "fixed window", "moving-window": "moving window",
    "sliding-window-counter": "sliding window counter", "token-bucket": "token bucket",
    "leaky-bucket": "leaky bucket", "gcra": "GCRA", "concurrency": "concurrency",
}
# Notation forms: (what README.md's section must contain, a limit the binary must accept, strategy).
FORMS = [
    ("N/unit", "10/minute", "gcra"),
    ("N per unit", "10 per minute", "gcra"),
    ("N per M units", "5 per 2 seconds", "gcra"),
    ("burst", "10/second burst 50", "token-bucket"),
    ("; ", "2/second; 100/hour", "gcra"),
    ("N concurrent", "8 concurrent", "concurrency"),
    ("N concurrent for T", "8 concurrent for 30 seconds", "concurrency"),
    ("calendar month", "5 per calendar month in Europe/Berlin anchored 31", "fixed-window"),
]
ENV = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")


def run(binary, *args, stdin=""):
    return subprocess.run([binary, *args], input=stdin, capture_output=True, text=True, env=ENV)


def strategies(binary):
    out = run(binary, "replay", "--help").stdout
    line = next((l for l in out.splitlines() if "--strategy TEXT" in l), "")
    m = re.search(r"([a-z-]+(?:, [a-z-]+)+) or ([a-z-]+)", line)
    if not m:
        sys.exit("check_lists.py: no strategy list in `floodgate replay --help`")
    return m.group(1).split(", ") + [m.group(2)]


def routes(src):
    text = open(os.path.join(src, "src/server/api/service.cpp"), encoding="utf-8").read()
    table = text[text.index("kRoutes[] = {"):]
    table = table[:table.index("};")]
    found = re.findall(r'\{"(/[^"]*)", http::verb::(\w+)', table)
    if not found:
        sys.exit("check_lists.py: no route in src/server/api/service.cpp's kRoutes")
    return {(path, {"delete_": "DELETE"}.get(verb, verb.upper())) for path, verb in found}


def units(binary):
    r = run(binary, "replay", "--strategy", "gcra", "--limit", "10/fortnight", stdin='{"t": 0, "key": "a"}\n')
    m = re.search(r"unknown unit \(expected ([^)]*)\)", r.stderr)
    if not m:
        sys.exit("check_lists.py: no unit list in the error for an unknown unit: " + r.stderr)
    plain = m.group(1).split(", or calendar ")[0]
    return re.split(r", | or ", plain)


def section(text, title):
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end != -1 else len(text)]


def check(src, binary):
    errors = []
    read = lambda p: open(os.path.join(src, p), encoding="utf-8").read()
    readme, config, api, algorithms = (read(p) for p in
                                       ("README.md", "docs/configuration.md", "docs/http-api.md", "docs/algorithms.md"))
    # ---- strategies
    names = strategies(binary)
    for doc, text in (("README.md", readme), ("docs/algorithms.md", algorithms)):
        for word in re.findall(r"\b(\w+) (?:algorithms|strategies)\b", text):
            if word.lower() in NUMBERS and NUMBERS[word.lower()] != len(names):
                errors.append(f"{doc}: says \"{word}\" algorithms/strategies; the binary has {len(names)}: {', '.join(names)}")
    intro = readme[:readme.index("\n## ")]
    for name in names:
        if PROSE.get(name, name).lower() not in intro.lower():
            errors.append(f"README.md: the first section does not name the strategy {name}")
    row = next((line for line in config.splitlines() if line.startswith("| `strategy` |")), "")
    listed = set(re.findall(r"`([a-z-]+)`", row.split("|")[3])) if row else set()
    for name in set(names) - listed:
        errors.append(f"docs/configuration.md: the strategy row lacks `{name}`")
    for name in listed - set(names):
        errors.append(f"docs/configuration.md: the strategy row lists `{name}`, which the binary does not have")
    # ---- endpoints
    table = routes(src)
    paths = {p for p, _ in table}
    rows = set(re.findall(r"^\| `(GET|POST|DELETE|HEAD) (/[^ ?`]*)", api, re.M))
    for path, verb in sorted(table):
        if (verb, path) not in rows:
            errors.append(f"docs/http-api.md: the endpoint table lacks `{verb} {path}`")
        if path.startswith("/v1/") and not re.search(re.escape(path) + r"(?![a-z_/])", readme):
            errors.append(f"README.md: does not mention {path}")
    for doc, text in (("README.md", readme), ("docs/configuration.md", config), ("docs/http-api.md", api)):
        for path in sorted(set(re.findall(r"/v1/[a-z_]+(?![a-z_/])", text))):
            if path not in paths:
                errors.append(f"{doc}: cites {path}, which the service does not serve")
        for verb, path in sorted(set(re.findall(r"\b(GET|POST|DELETE) (/[a-z0-9_/]*[a-z0-9_])(?![a-z0-9_/])", text))):
            if path in paths and (path, verb) not in table and not (verb == "GET" and (path, "HEAD") in table):
                errors.append(f"{doc}: cites {verb} {path}; the service serves {path} with "
                              + ", ".join(sorted(v for p, v in table if p == path)))
    # docs/openapi.yaml: each route's path with its method, and no path the service lacks.
    spec, path, ops = read("docs/openapi.yaml"), None, set()
    for line in spec.splitlines():
        if m := re.match(r"^  (/[^:]*):\s*$", line):
            path = m.group(1)
        elif path and (m := re.match(r"^    (get|post|delete|put|patch):", line)):
            ops.add((path, m.group(1).upper()))
    for path, verb in sorted(table - ops):
        errors.append(f"docs/openapi.yaml: lacks {verb} {path}")
    for path, verb in sorted(ops - table):
        errors.append(f"docs/openapi.yaml: has {verb} {path}, which the service does not serve")
    # ---- rate notation
    notation = section(readme, "## Rate notation")
    for form, example, strategy in FORMS:
        r = run(binary, "replay", "--strategy", strategy, "--limit", example, stdin='{"t": 0, "key": "a"}\n')
        if r.returncode != 0:
            errors.append(f"the binary refuses the form {form!r} ({example!r}): {r.stderr.strip()}")
        if form not in notation:
            errors.append(f"README.md: the Rate notation section does not show {form!r}")
    for unit in units(binary):
        if f"`{unit}`" not in notation:
            errors.append(f"README.md: the Rate notation section does not name the unit `{unit}`")
    return errors


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    errors = check(sys.argv[1], sys.argv[2])
    for e in errors:
        print("FAIL", e)
    if not errors:
        print("docs' strategies, endpoints and rate notation match the binary")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
