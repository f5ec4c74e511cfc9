#!/usr/bin/env python3
"""The layout check fails where it should: on a small tree with one include cycle between units,
an api/ file that includes http/, a config/ file that includes rls/ and util/ including the core;
and passes once those are gone."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_includes.py")


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        write(root, "include/floodgate/storage.hpp", "#pragma once\n")
        write(root, "src/server/http/server.hpp", '#pragma once\n#include "server/http/session.hpp"\n')
        write(root, "src/server/http/server.cpp", '#include "server/http/server.hpp"\n')
        write(root, "src/server/http/session.hpp", "#pragma once\n")
        write(root, "src/server/http/session.cpp", '#include "server/http/session.hpp"\n#include "server/http/server.hpp"\n')
        write(root, "src/server/api/service.cpp", '#include "server/http/server.hpp"\n')
        write(root, "src/server/config/config.cpp", '#include "server/rls/rules.hpp"\n')
        write(root, "src/server/rls/rules.hpp", "#pragma once\n")
        write(root, "src/util/text.hpp", '#pragma once\n#include "floodgate/storage.hpp"\n')
        code, out = run(root)
        expected = [
            "include cycle between units: src/server/http/server <-> src/server/http/session",
            "src/server/api/service.cpp includes src/server/http/server.hpp: server/api/ may not include server/http/",
            "only http/ and cli/ include http/",
            "server/config/ may not include server/rls/",
            "util/ includes nothing of the project",
        ]
        if code != 1:
            failures.append(f"exit {code} on a broken tree, expected 1")
        for e in expected:
            if e not in out:
                failures.append(f"missing: {e}")
        # Mended: the session no longer includes the server, the rest removed.
        write(root, "src/server/http/session.cpp", '#include "server/http/session.hpp"\n')
        write(root, "src/server/api/service.cpp", "\n")
        write(root, "src/server/config/config.cpp", "\n")
        write(root, "src/util/text.hpp", "#pragma once\n")
        code, out = run(root)
        if code != 0 or "0 cycles, 0 problems" not in out:
            failures.append(f"exit {code} on a mended tree, expected 0:\n{out}")
    for f in failures:
        print("FAIL " + f)
    print(f"{0 if failures else 1} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
