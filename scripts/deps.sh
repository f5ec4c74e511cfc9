#!/usr/bin/env bash
# Installs the Debian 12 packages floodgate needs, only those that are missing.
#   scripts/deps.sh          build and run
#   scripts/deps.sh --package  also what scripts/package.sh needs (help2man for the manual pages,
#                            dpkg-dev's dpkg-shlibdeps for Depends, buildah for the image, the CA
#                            bundle it holds, python3 for the bills of materials)
#   scripts/deps.sh --test   also what the test suite needs (clang + libFuzzer runtime, servers,
#                            chromium and Node.js for the dashboard's browser test, xmllint,
#                            promtool from Debian's prometheus for /metrics, memcached;
#                            pymemcache for bench/memcached's Python `limits` peer, Flask and
#                            Flask-Limiter for the Python module's tests), and what
#                            scripts/package.sh and its check need (lintian, systemd-analyze,
#                            man-db for the unit's man: links, PyYAML and kubectl for the
#                            manifests' test)
set -euo pipefail

packages=(g++ cmake make ninja-build ccache pkg-config
          libboost1.81-dev libboost-json1.81-dev libboost-url1.81-dev libabsl-dev libcli11-dev libfmt-dev
          libspdlog-dev libyaml-cpp-dev libhiredis-dev libmemcached-dev libssl-dev libgnutls28-dev zlib1g-dev
          libgtest-dev libgmock-dev libbenchmark-dev
          libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc
          pybind11-dev python3-dev  # the Python module (python/)
          tzdata)  # the IANA zones of calendar limits (/usr/share/zoneinfo, read by abseil)
if [[ "${1:-}" == "--test" || "${1:-}" == "--package" ]]; then
  packages+=(help2man dpkg-dev buildah ca-certificates python3)
fi
if [[ "${1:-}" == "--test" ]]; then
  packages+=(lintian systemd man-db python3-yaml python3-grpcio
            clang libclang-rt-14-dev llvm-14 redis-server redis-sentinel redis-tools memcached python3-pymemcache nginx wrk curl nodejs
            chromium fonts-dejavu-core libxml2-utils prometheus openssl
            python3-flask python3-flask-limiter python3-redis)  # the Python module's tests: Flask-Limiter (python3-limits 2.8 with it), limits 5.8 on Redis
  # npm installs the gRPC end-to-end test's Node client, playwright-core (tests/integration/browser)
  # and structured-headers (tests/integration/headers);
  # it is bundled with some nodejs builds.
  if ! command -v npm >/dev/null 2>&1; then packages+=(npm); fi
  # kubectl renders the Kubernetes manifests as applied (kubectl kustomize) for tests/packaging
  # (without it, tests/packaging/kustomize.py renders the subset the manifests use):
  # not in Debian 12's archive; from Kubernetes' own apt repository when the sources list it.
  if ! command -v kubectl >/dev/null 2>&1 && apt-cache show kubectl >/dev/null 2>&1; then packages+=(kubectl); fi
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=""
if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
echo "deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
