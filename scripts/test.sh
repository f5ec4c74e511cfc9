#!/usr/bin/env bash
# The whole test suite on a fresh Debian 12 machine: installs what is missing, then builds and runs
#   1. every test under AddressSanitizer + UndefinedBehaviorSanitizer (clang: unit, conformance
#      through the library and the real binary, exactness, boundary table, concurrency), and in the
#      same build the libFuzzer targets, FLOODGATE_FUZZ_SECONDS each (default 20): the rate parser,
#      the algorithms, the traffic specs, access-log lines, the service's configuration loader, the
#      rule loader, and HTTP requests through the API in process;
#   2. the concurrency tests and the Envoy service's suite under ThreadSanitizer (g++);
#   3. a release build of the binary, the benchmark (a short smoke run), the library's tests and
#      the Python module (its tests: the API, the differential test against `limits`, Flask-Limiter),
#      `cmake --install`, the example in examples/ built against the installed package with
#      find_package(floodgate CONFIG), then the library's tests and nginx against the release binary;
#   4. the packages from that release build (scripts/package.sh: the Debian packages, the OCI image,
#      the bills of materials in dist/) and their checks (tests/packaging/check.sh: lintian,
#      systemd-analyze, installed with dpkg -i, served, purged; the image run from its own root
#      file system; the Kubernetes manifests' probes against the real binary).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc)"
scripts/deps.sh --test

# Each stage's heading carries the seconds since the start (the dependencies' install included).
step() { printf '\n=== [%d s] %s\n' "$SECONDS" "$*"; }

# clang's sanitizers name the source lines of a report with LLVM's symbolizer (llvm-14).
if [[ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi

step "ASan + UBSan: all tests, and the libFuzzer targets (rate parser, algorithm action traces, traffic specs, access-log lines, configuration and rule loaders, the HTTP API)"
# One clang build for both: the product's objects carry libFuzzer's coverage, the tests' do not.
cmake --preset asan -DFLOODGATE_FUZZ_SECONDS="${FLOODGATE_FUZZ_SECONDS:-20}" >/dev/null
cmake --build --preset asan -j"$jobs"
ctest --preset asan -j"$jobs" --output-on-failure

step "TSan: concurrency tests, the Envoy service's suite"
cmake --preset tsan >/dev/null
cmake --build --preset tsan -j"$jobs" --target floodgate_concurrency_tests floodgate_budget_tests floodgate_rls_tests
ctest --preset tsan --output-on-failure
# The Envoy service's whole suite too (built above for its concurrency tests; about 7 s): it is
# where protobuf's code, built without TSan, meets ours.
build/tsan/tests/floodgate_rls_tests --gtest_brief=1

step "Release: benchmarks (smoke), install, example against the installed package"
cmake --preset release >/dev/null
# The shipped binary, the benchmark and the library's tests: every test executable was already
# built and run under both sanitizers, so release does not compile them a third time.
cmake --build --preset release -j"$jobs" --target floodgate_cli floodgate_benchmark floodgate_tests \
  floodgate_python_package
build/release/bench/floodgate_benchmark --benchmark_filter='BM_Decision/6/10000/real_time/threads:1' \
  --benchmark_min_time=0.05
prefix="$(mktemp -d)"
trap 'rm -rf "$prefix"' EXIT
cmake --install build/release --prefix "$prefix" >/dev/null
cmake -S examples/basic -B "$prefix/example-build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/example-build" -j"$jobs" >/dev/null
"$prefix/example-build/basic_example" | tee "$prefix/example.out"
grep -q "request 4: denied, retry after 4 s" "$prefix/example.out"
"$prefix/bin/floodgate" replay --strategy gcra --limit "3 per 12 seconds" \
  < examples/traces/burst.jsonl | cmp - examples/traces/burst.expected.jsonl
echo "installed example and binary: ok"

step "Release: the library's tests (unit, conformance), nginx in front of the release binary, the Python module"
# The Python module is built and tested here only: an ASan-instrumented extension cannot be
# loaded into a stock python3.
ctest --preset release -j"$jobs" -L 'unit|nginx|python' --output-on-failure

step "Packages: Debian packages, OCI image and SBOMs from the release build; lintian, systemd-analyze, install, run, purge; the image; the Kubernetes manifests"
packages_start=$SECONDS
scripts/package.sh
# As root (it installs and purges the packages, uses chroot and network namespaces), like deps.sh.
if [[ "$(id -u)" == 0 ]]; then tests/packaging/check.sh dist; else sudo tests/packaging/check.sh dist; fi
echo "packages: $((SECONDS - packages_start)) s"
step "all passed"
