#!/usr/bin/env bash
# Builds the release artifacts into dist/ (Debian 12; installs what is missing, like the other
# scripts), from the release build directory (build/release, the one scripts/test.sh uses):
#   floodgate_<version>_<arch>.deb        the program, manual pages, /etc/floodgate, systemd unit
#   floodgate-dev_<version>_<arch>.deb    the static library, headers, CMake package
#   python3-floodgate_<version>_<arch>.deb  the Python module (floodgate, floodgate.limits)
#   floodgate-<version>-oci.tar           the container image, an OCI archive (no registry needed)
#   *.spdx.json                           the bills of materials (SPDX 2.3): the Debian packages,
#                                         with versions, of the libraries each one links or holds
#   SHA256SUMS
# tests/packaging/check.sh checks them (lintian, systemd-analyze, install, run, purge, the image,
# the Kubernetes manifests). Versions come from git tags (cmake/version.cmake; CHANGELOG.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh --package
jobs="$(nproc)"

cmake --preset release >/dev/null
targets=(floodgate_cli floodgate floodgate_package_files)
# The Python module when the build has it (pybind11-dev and python3-dev: scripts/deps.sh).
if grep -q '^pybind11_DIR:PATH=/' build/release/CMakeCache.txt; then targets+=(floodgate_python_package); fi
cmake --build --preset release -j"$jobs" --target "${targets[@]}"
# shellcheck source=/dev/null
source build/release/packaging/version.env
rm -rf dist build/release/packages
mkdir -p dist
cpack --config build/release/CPackConfig.cmake -B build/release/packages > build/release/packages.log 2>&1 \
  || { cat build/release/packages.log >&2; exit 1; }
mv build/release/packages/*.deb dist/
deb="dist/floodgate_${FLOODGATE_DEBIAN_VERSION}_${FLOODGATE_DEB_ARCH}.deb"
image="dist/floodgate-${FLOODGATE_VERSION}-oci.tar"
[[ -f "$deb" ]] || { echo "package.sh: cpack did not make $deb" >&2; ls dist >&2; exit 1; }

# buildah keeps its (temporary) store as root; through sudo otherwise, like deps.sh.
sudo=""
if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
$sudo packaging/image/build-image.sh "$deb" "$image" "$FLOODGATE_VERSION" "$FLOODGATE_COMMIT" "$FLOODGATE_COMMIT_EPOCH"
if [[ -n "$sudo" ]]; then sudo chown "$(id -u):$(id -g)" "$image"; fi

common=(--binary build/release/floodgate --version "$FLOODGATE_VERSION" --commit "$FLOODGATE_COMMIT"
        --epoch "$FLOODGATE_COMMIT_EPOCH")
packaging/sbom.py spdx "${common[@]}" --kind deb --artifact "$deb" --extra-package tzdata --out "${deb%.deb}.spdx.json"
packaging/sbom.py spdx "${common[@]}" --kind image --artifact "$image" --extra-package ca-certificates --extra-package tzdata \
  --out "${image%.tar}.spdx.json"
(cd dist && sha256sum -- *.deb *.tar *.spdx.json > SHA256SUMS)
echo "dist/ (floodgate ${FLOODGATE_VERSION}, commit ${FLOODGATE_COMMIT}):"
(cd dist && ls -l -- * | awk '{printf "  %10d  %s\n", $5, $9}')
