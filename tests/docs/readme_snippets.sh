#!/usr/bin/env bash
# The README's C++ examples compile as shown, without a warning under the project's own flags:
# every ```cpp block that starts with an #include is a whole program and is compiled with
# -fsyntax-only against include/. A block that does not compile, or warns, fails the test.
#   tests/docs/readme_snippets.sh SOURCE_DIR [CXX]
set -euo pipefail
src="$1"
cxx="${2:-g++}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
awk -v dir="$work" '/^```cpp/{inside=1; n++; next} /^```/{inside=0; next} inside{print > (dir "/snippet" n ".cpp")}' "$src/README.md"
checked=0
failed=0
for f in "$work"/snippet*.cpp; do
  [[ -e "$f" ]] || continue
  head -n1 "$f" | grep -q '^#include' || continue
  checked=$((checked + 1))
  if ! out="$("$cxx" -std=c++20 -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Werror \
      -fsyntax-only -I"$src/include" "$f" 2>&1)"; then
    failed=$((failed + 1))
    echo "FAIL $(basename "$f"):"
    echo "$out" | head -20
    cat -n "$f"
  fi
done
if ((checked == 0)); then
  echo "FAIL no whole-program C++ example found in README.md"
  exit 1
fi
echo "$((checked - failed)) passed, $failed failed"
((failed == 0))
