#!/usr/bin/env python3
"""Checks that the rooms stay small.

  check_sizes.py [SOURCE_DIR]

Over every .cpp and .hpp under src/ and include/:
  - a file holds at most 400 lines of code (lines that are neither blank nor only a comment) and
    600 lines in all;
  - a function (a free function, a member function, a constructor; with the lambdas inside it)
    spans at most 60 lines, from the first line of its signature to its closing brace.
Prints every file and function over a bound, then the counts; exits 1 if there is any.
"""
import os
import re
import sys

MAX_CODE, MAX_LINES, MAX_FUNCTION = 400, 600, 60


def strip(text):
    """The text with comments, string and character literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join(ch if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "".join(ch if ch == "\n" else " " for ch in text[i + 2:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum() and text[i + 1:i + 2].isalnum():
                out.append(" ")  # a digit separator: 1'000'000
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def code_lines(text):
    return sum(1 for line in strip(text).splitlines() if line.strip())


HEAD_KEYWORDS = re.compile(r"\b(namespace|class|struct|union|enum)\b")
CONTROL = re.compile(r"^\s*(if|for|while|switch|catch|do|else|try)\b")


def functions(text):
    """(name, first line, last line) of every function body at namespace or class scope."""
    s = strip(text)
    found = []
    stack = []  # the kind of each open brace: 'scope' (namespace, class, extern), 'function', 'other'
    start = 0  # where the current declaration began (after the last ; { } at this level)
    i = 0
    while i < len(s):
        c = s[i]
        if c == "{":
            head = s[start:i]
            at_scope = all(k == "scope" for k in stack)
            kind = "other"
            if at_scope:
                flat = " ".join(head.split())
                if HEAD_KEYWORDS.search(flat) and ")" not in flat.split("=")[0] or re.search(r'extern\s*""$', flat):
                    kind = "scope"
                elif ")" in flat and not flat.rstrip().endswith("=") and not CONTROL.match(flat):
                    kind = "function"
                    bare = flat
                    while re.search(r"<[^<>]*>", bare):  # template arguments: std::function<int()> f(
                        bare = re.sub(r"<[^<>]*>", "", bare)
                    name = re.findall(r"([~\w:]+)\s*\(", bare)
                    first = s.count("\n", 0, start + len(head) - len(head.lstrip())) + 1
                    stack.append(kind)
                    depth = len(stack)
                    j = i + 1
                    while j < len(s) and len(stack) >= depth:
                        if s[j] == "{":
                            stack.append("other")
                        elif s[j] == "}":
                            stack.pop()
                        j += 1
                    last = s.count("\n", 0, j) + 1
                    found.append((name[0] if name else "?", first, last))
                    i = j
                    start = j
                    continue
            stack.append(kind)
            start = i + 1
        elif c == "}":
            if stack:
                stack.pop()
            start = i + 1
        elif c == ";" or (c == ":" and s[i - 1:i + 1] != "::" and s[i:i + 2] != "::" and re.search(r"\b(public|private|protected)\s*$", s[start:i])):
            start = i + 1
        elif c == "#" and (i == 0 or s[i - 1] == "\n"):
            j = s.find("\n", i)
            while j > 0 and s[j - 1] == "\\":
                j = s.find("\n", j + 1)
            i = len(s) if j < 0 else j
            start = i
            continue
        i += 1
    return found


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    problems, n_files, n_functions = [], 0, 0
    for top in ("src", "include"):
        for d, _, names in sorted(os.walk(os.path.join(root, top))):
            for name in sorted(names):
                if not name.endswith((".cpp", ".hpp")):
                    continue
                path = os.path.join(d, name)
                rel = os.path.relpath(path, root)
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
                n_files += 1
                total, code = len(text.splitlines()), code_lines(text)
                if code > MAX_CODE or total > MAX_LINES:
                    problems.append(f"{rel}: {code} lines of code, {total} in all (at most {MAX_CODE} and {MAX_LINES})")
                for fn, first, last in functions(text):
                    n_functions += 1
                    if last - first + 1 > MAX_FUNCTION:
                        problems.append(f"{rel}:{first}: {fn} spans {last - first + 1} lines (at most {MAX_FUNCTION})")
    for p in problems:
        print("FAIL " + p)
    print(f"{n_files} files, {n_functions} functions, {len(problems)} over a bound")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
