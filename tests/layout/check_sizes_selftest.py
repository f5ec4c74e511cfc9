#!/usr/bin/env python3
"""The size check fails where it should: on a tree with a file of 401 lines of code, a file of 601
lines in all (mostly comments), and a function of 61 lines; and passes on the same tree with each
one line shorter (comments, blank lines and string contents that look like braces do not count)."""
import os
import subprocess
import sys
import tempfile

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_sizes.py")


def write(root, path, text):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w", encoding="utf-8") as f:
        f.write(text)


def tree(root, extra):
    code = "".join(f"int v{i} = {i};\n" for i in range(400 + extra)) + "// a comment\n\n"
    write(root, "src/big.cpp", code)
    write(root, "include/floodgate/long.hpp", "#pragma once\n" + "// words\n" * (599 + extra))
    body = "".join(f'  x += "{{";  // }}\n' for _ in range(57 + extra))
    write(root, "src/x/f.cpp", "namespace n {\nclass C {\n public:\n  int f(int x) const {\n" + body +
          "    return x;\n  }\n};\n}  // namespace n\n" + "auto g = [](int y) {\n return y;\n};\n")


def run(root):
    p = subprocess.run([sys.executable, CHECK, root], capture_output=True, text=True)
    return p.returncode, p.stdout


def main():
    failures = []
    with tempfile.TemporaryDirectory() as root:
        tree(root, 1)
        code, out = run(root)
        for want in ("src/big.cpp: 401 lines of code", "include/floodgate/long.hpp: 1 lines of code, 601 in all",
                     "src/x/f.cpp:4: f spans 61 lines"):
            if want not in out:
                failures.append(f"expected {want!r} in:\n{out}")
        if code != 1:
            failures.append(f"expected exit 1, got {code}")
    with tempfile.TemporaryDirectory() as root:
        tree(root, 0)
        code, out = run(root)
        if code != 0 or "0 over a bound" not in out:
            failures.append(f"expected a pass, got {code}:\n{out}")
    for f in failures:
        print("FAIL " + f)
    print("size check self-test: " + ("failed" if failures else "ok"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
