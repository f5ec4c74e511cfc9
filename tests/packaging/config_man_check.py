#!/usr/bin/env python3
"""floodgate.yaml(5) as the package builds it: made from docs/configuration.md without a warning
from groff (-ww) or man (--warnings, as lintian runs it), one entry per row of the reference's
tables, and every key the shipped configuration (packaging/floodgate.yaml) sets among them.

  tests/packaging/config_man_check.py SOURCE_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

import yaml


def keys(tree, prefix=""):
    for k, v in tree.items():
        yield prefix + k
        if isinstance(v, dict) and k not in ("key",):
            yield from keys(v, prefix + k + ".")


def main():
    src = sys.argv[1]
    errors = []
    with tempfile.TemporaryDirectory() as work:
        page = os.path.join(work, "floodgate.yaml.5")
        subprocess.run([sys.executable, os.path.join(src, "packaging/man/make-config-man.py"),
                        os.path.join(src, "docs/configuration.md"), page, "0.0.0"], check=True)
        text = open(page, encoding="ascii").read()
        groff = subprocess.run(["groff", "-ww", "-man", "-z", page], capture_output=True, text=True)
        if groff.returncode != 0 or groff.stderr.strip():
            errors.append("groff -ww: " + groff.stderr.strip())
        for width in ("80", "64"):
            env = dict(os.environ, MANWIDTH=width, LC_ALL="C.UTF-8")
            man = subprocess.run(["man", "--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", page],
                                 capture_output=True, text=True, env=env)
            if man.returncode != 0 or man.stderr.strip():
                errors.append(f"man --warnings (width {width}): " + man.stderr.strip())
    entries = set(re.findall(r"^\.TP\n\\fB(.*?)\\fR$", text, re.M))
    reference = open(os.path.join(src, "docs/configuration.md"), encoding="utf-8").read()
    rows = re.findall(r"^\| `([^`]+)`(?:, `[^`]+`)? \|", reference, re.M)
    for field in rows:
        if field.replace("-", "\\-") not in " ".join(entries):
            errors.append(f"floodgate.yaml(5) has no entry for {field}")
    shipped = yaml.safe_load(open(os.path.join(src, "packaging/floodgate.yaml"), encoding="utf-8"))
    documented = {e.replace("\\-", "-") for e in entries} | {p.strip() for e in entries for p in e.replace("\\-", "-").split(",")}
    for key in keys(shipped):
        if key not in documented:
            errors.append(f"packaging/floodgate.yaml sets {key}, which floodgate.yaml(5) does not describe")
    for policy in shipped.get("policies", []):
        for key in policy:
            if key not in documented:
                errors.append(f"packaging/floodgate.yaml: policy key {key} is not in floodgate.yaml(5)")
    for e in errors:
        print("FAIL", e)
    if not errors:
        print(f"floodgate.yaml(5): {len(entries)} entries, no warning; the shipped configuration's keys are all described")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
