#!/usr/bin/env python3
"""check_lists.py fails when a doc drops an endpoint, a strategy or a notation form, or cites an
endpoint the service does not have (each on a copy of the docs), and passes on the docs as they are.

  tests/docs/check_lists_selftest.py SOURCE_DIR FLOODGATE_BINARY
"""
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = ["README.md", "docs/configuration.md", "docs/http-api.md", "docs/algorithms.md", "docs/openapi.yaml",
         "src/server/api/service.cpp"]
# (file, text to remove or replace, replacement, the failure expected in the output)
BREAKS = [
    ("docs/http-api.md", "| `POST /v1/renew` |", "| `POST /v1/renewal` |", "lacks `POST /v1/renew`"),
    ("README.md", "/v1/release", "/v1/freeit", "does not mention /v1/release"),
    ("docs/configuration.md", "`gcra`, `concurrency` |", "`gcra` |", "lacks `concurrency`"),
    ("docs/configuration.md", "`gcra`, `concurrency` |", "`gcra`, `concurrency`, `sliding-log` |", "`sliding-log`"),
    ("docs/configuration.md", "The printed form (logs,", "The printed form (logs, `/v1/policies`,", "cites /v1/policies"),
    ("docs/algorithms.md", "floodgate has seven strategies", "floodgate has six strategies", "says \"six\""),
    ("README.md", "`N concurrent for T`", "`N concurrent`", "'N concurrent for T'"),
    ("docs/openapi.yaml", "  /v1/renew:", "  /v1/renewal:", "docs/openapi.yaml: lacks POST /v1/renew"),
]


def run(root, binary):
    return subprocess.run([sys.executable, os.path.join(HERE, "check_lists.py"), root, binary],
                          capture_output=True, text=True)


def main():
    src, binary = sys.argv[1], sys.argv[2]
    failures = 0
    ok = run(src, binary)
    if ok.returncode != 0:
        print("FAIL the docs as they are do not pass:\n" + ok.stdout + ok.stderr)
        failures += 1
    for path, old, new, expected in BREAKS:
        with tempfile.TemporaryDirectory() as root:
            for f in FILES:
                os.makedirs(os.path.join(root, os.path.dirname(f)), exist_ok=True)
                shutil.copy(os.path.join(src, f), os.path.join(root, f))
            target = os.path.join(root, path)
            text = open(target, encoding="utf-8").read()
            if old not in text:
                print(f"FAIL {path} no longer holds {old!r}: update this self-test")
                failures += 1
                continue
            open(target, "w", encoding="utf-8").write(text.replace(old, new))
            r = run(root, binary)
            if r.returncode == 0 or expected not in r.stdout:
                print(f"FAIL {path} with {new!r} for {old!r}: expected a failure with {expected!r}, got:\n{r.stdout}{r.stderr}")
                failures += 1
    print(f"{len(BREAKS) + 1 - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
