#!/usr/bin/env python3
"""Walks the project's #include "…" lines and checks the layout's rules.

  check_includes.py [SOURCE_DIR]

A unit is a source file with the header of the same name in its folder (src/x/y.cpp with
src/x/y.hpp) and with its public header (include/floodgate/x/y.hpp). The rules:
  1. no include cycle between units;
  2. the service's folders (src/server/*/) include only what their layer may:
     config/ only config/; api/ nothing from rls/ grpc/ xds/ http/ net/; http/ is included only from
     http/ and cli/; common/ nothing from the other service folders;
  3. the core (src/ outside server/, cli/ and sim/, and include/ outside floodgate/sim/) never
     includes the service, the CLI or the simulator, and the core library (add_library(floodgate)
     in CMakeLists.txt) compiles no simulator source;
     util/ includes nothing of the project.
Prints the units, the include edges between them, every cycle and every broken rule; exits 1 if
there is any.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def files_under(root, top):
    out = []
    for d, _, names in os.walk(os.path.join(root, top)):
        for n in names:
            if n.endswith((".cpp", ".hpp", ".h")):
                out.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(out)


def resolve(root, including, name):
    """The project file an include names (relative to src/, include/, or the including file), or None."""
    for base in ("src", "include", os.path.dirname(including)):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, p)):
            return p
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    files = files_under(root, "src") + files_under(root, "include")
    includes = {}
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            names = INCLUDE.findall(fh.read())
        includes[f] = [r for r in (resolve(root, f, n) for n in names) if r is not None]

    # Units: a source and the header of the same name in its folder share their path's stem; a
    # public header include/floodgate/P.hpp is one unit with src/P.cpp (and src/P.hpp).
    def unit_of(f):
        stem = os.path.splitext(f)[0]
        if stem.startswith("include/floodgate/"):
            return "src/" + stem[len("include/floodgate/"):]
        return stem

    unit = {f: unit_of(f) for f in files}
    edges = {}
    for f, incs in includes.items():
        for g in incs:
            if unit[g] != unit[f]:
                edges.setdefault(unit[f], set()).add(unit[g])
    units = sorted(set(unit.values()))

    # Cycles: strongly connected components of more than one unit (Tarjan).
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in units:
        if v not in index:
            strong(v)

    problems = []
    for comp in sccs:
        problems.append("include cycle between units: " + " <-> ".join(comp))

    def folder(f):
        parts = f.split("/")
        if parts[0] == "src" and len(parts) > 3 and parts[1] == "server":
            return "server/" + parts[2]
        if parts[0] == "src" and len(parts) > 2:
            return parts[1]
        return parts[0]

    server_folders = {"server/" + d for d in ("config", "net", "http", "api", "rls", "rlqs", "grpc", "xds", "common")}
    may_not = {
        "server/config": server_folders - {"server/config"},
        "server/api": {"server/rls", "server/rlqs", "server/grpc", "server/xds", "server/http", "server/net"},
        "server/common": server_folders - {"server/common"},
    }
    for f in files:
        src = folder(f)
        if f.startswith("src/server/") and src not in server_folders:
            problems.append(f"{f}: a service file outside the service's folders")
        for g in includes[f]:
            dst = folder(g)
            if dst in may_not.get(src, ()):
                problems.append(f"{f} includes {g}: {src}/ may not include {dst}/")
            if dst == "server/http" and src not in ("server/http", "cli"):
                problems.append(f"{f} includes {g}: only http/ and cli/ include http/")
            core = not f.startswith(("src/server/", "src/cli/", "src/sim/", "include/floodgate/sim/"))
            if core and g.startswith(("src/server/", "src/cli/")):
                problems.append(f"{f} includes {g}: the core includes neither the service nor the CLI")
            if core and g.startswith(("src/sim/", "include/floodgate/sim/")):
                problems.append(f"{f} includes {g}: the core does not include the simulator")
            if src == "util" and dst != "util":
                problems.append(f"{f} includes {g}: util/ includes nothing of the project")

    # The core library (add_library(floodgate ...) in CMakeLists.txt) compiles no simulator source.
    cmake = os.path.join(root, "CMakeLists.txt")
    if os.path.isfile(cmake):
        with open(cmake, encoding="utf-8") as fh:
            m = re.search(r"add_library\(floodgate\s([^)]*)\)", fh.read())
        for source in (m.group(1).split() if m else []):
            if source.startswith("src/sim/"):
                problems.append(f"CMakeLists.txt: the core library floodgate compiles {source}: it belongs to floodgate_sim")

    n_edges = sum(len(v) for v in edges.values())
    print(f"{len(files)} files in {len(units)} units, {n_edges} include edges between units")
    for comp in sccs:
        print("cycle: " + " <-> ".join(comp))
    for p in problems:
        print("FAIL " + p)
    print(f"{len(sccs)} cycles, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
