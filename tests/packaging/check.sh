#!/usr/bin/env bash
# Checks what scripts/package.sh left in dist/ (scripts/test.sh's last step runs both). As root:
# it installs and purges the packages on this machine, and uses chroot and network namespaces.
#   1. lintian on both packages: no error and no warning (each one fixed, or overridden with its
#      reason in packaging/debian/*.lintian-overrides, installed with the package);
#   2. systemd-analyze security --offline: the unit's exposure at most 2.0;
#   3. dpkg -i both; systemd-analyze verify on the installed unit; its ExecStartPre and ExecStart
#      lines run from the installed files as an unprivileged user (systemd is not PID 1 here),
#      answering /healthz, /readyz and /v1/hit, reloading on SIGHUP, stopping on SIGTERM;
#      find_package(floodgate <version> EXACT) against the installed floodgate-dev;
#      dpkg --purge both, and nothing of them is left;
#   4. the image: layout, digests, file list and size (image_check.py), then from its own root
#      file system as 65534: /bin/ratelimit with envoyproxy/ratelimit's environment, and its
#      default command;
#   5. the Kubernetes manifests (manifests_test.py --self-check);
#   6. the bills of materials (sbom_check.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
dist="${1:-dist}"
here=tests/packaging
shopt -s nullglob
debs=("$dist"/floodgate_*.deb) devs=("$dist"/floodgate-dev_*.deb) images=("$dist"/floodgate-*-oci.tar)
pys=("$dist"/python3-floodgate_*.deb)
shopt -u nullglob
if ((${#debs[@]} != 1 || ${#devs[@]} != 1 || ${#images[@]} != 1)); then
  echo "check.sh: expected one floodgate_*.deb, floodgate-dev_*.deb and floodgate-*-oci.tar in $dist (scripts/package.sh)" >&2
  exit 1
fi
deb="${debs[0]}" dev="${devs[0]}" image="${images[0]}"
[[ "$(id -u)" == 0 ]] || { echo "check.sh: run as root (dpkg -i, chroot, network namespaces)" >&2; exit 1; }
work="$(mktemp -d)"
chmod 0755 "$work"
installed=""
cleanup() {
  if [[ -n "$installed" ]]; then dpkg --purge floodgate floodgate-dev python3-floodgate >/dev/null 2>&1 || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
section() { printf -- '--- %s\n' "$*"; }

section "lintian"
cp "$deb" "$dev" "$work/" && chmod 0644 "$work"/*.deb
touch "$work/before-lintian"
# As nobody: lintian unpacks what it checks and asks not to be run as root.
setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$work" TMPDIR="$work" \
  lintian --fail-on error,warning --display-level '>=warning' "$work/$(basename "$deb")" "$work/$(basename "$dev")"
echo "lintian: no errors or warnings ($(basename "$deb"), $(basename "$dev"))"
# lintian leaves its ELF caches in /tmp whatever TMPDIR says: those of this run go.
find /tmp -maxdepth 1 -name 'mldbm-*' -user 65534 -newer "$work/before-lintian" -exec rm -rf {} +

section "systemd-analyze security"
security="$(systemd-analyze security --offline=yes packaging/systemd/floodgate.service 2>&1 | tail -1)"
echo "$security"
exposure="$(sed -nE 's/.*exposure level for floodgate\.service: ([0-9.]+) .*/\1/p' <<<"$security")"
[[ -n "$exposure" ]] || { echo "check.sh: no exposure level in: $security" >&2; exit 1; }
awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }' || { echo "check.sh: exposure $exposure > 2.0" >&2; exit 1; }

section "dpkg -i, the installed service, dpkg --purge"
if dpkg-query -W -f='${Status}' floodgate floodgate-dev 2>/dev/null | grep -q installed; then
  echo "check.sh: floodgate is already installed on this machine; the check installs and purges it:" \
       "dpkg --purge floodgate floodgate-dev first" >&2
  exit 1
fi
installed=1
dpkg -i "$deb" "$dev" >/dev/null
dpkg-query -W -f='${Conffiles}\n' floodgate | grep -q '/etc/floodgate/floodgate.yaml' \
  || { echo "check.sh: /etc/floodgate/floodgate.yaml is not a conffile" >&2; exit 1; }
unit=/lib/systemd/system/floodgate.service
verify="$(systemd-analyze verify "$unit" 2>&1)" || true
mannote=""
if [[ ! -e /usr/share/man/man1/floodgate.1.gz ]]; then
  # dpkg on this machine skips manual pages (path-exclude, as in Debian's slim images): the
  # unit's Documentation=man: links cannot resolve here, and only they may be reported.
  verify="$(grep -v "Command 'man floodgate" <<<"$verify" || true)"
  mannote=" (manual pages excluded by dpkg's configuration here: their links not checked)"
fi
[[ -z "$verify" ]] || { echo "check.sh: systemd-analyze verify: $verify" >&2; exit 1; }
echo "systemd-analyze verify $unit: clean$mannote"
read -r -a pre <<<"$(sed -n 's/^ExecStartPre=//p' "$unit")"
read -r -a start <<<"$(sed -n 's/^ExecStart=//p' "$unit")"
config="$(sed -n 's/^ExecStart=.*--config \([^ ]*\).*/\1/p' "$unit")"
port="$(sed -nE 's/^listen: *[0-9.]+:([0-9]+).*/\1/p' "$config")"
setpriv --reuid=65534 --regid=65534 --clear-groups --no-new-privs "${pre[@]}"
$here/in_netns.py $here/serve_check.sh --port "$port" --hit api --reload -- "${start[@]}"
version="$(sed -nE 's/^floodgate ([0-9]+\.[0-9]+\.[0-9]+).*/\1/p' <<<"$(/usr/bin/floodgate --version)")"
cmake -S $here/find_package -B "$work/find_package" -DFLOODGATE_EXPECTED_VERSION="$version" \
  | grep 'floodgate '
if [[ -z "$mannote" ]]; then man -w floodgate floodgate-serve floodgate.yaml >/dev/null; fi
dpkg --purge floodgate floodgate-dev >/dev/null
installed=""
left=()
for path in /etc/floodgate /usr/bin/floodgate "$unit" /usr/share/doc/floodgate /usr/share/doc/floodgate-dev \
            /usr/share/man/man1/floodgate.1.gz /usr/share/man/man5/floodgate.yaml.5.gz /usr/include/floodgate /usr/lib/cmake/floodgate /usr/lib/libfloodgate.a; do
  if [[ -e "$path" ]]; then left+=("$path"); fi
done
if dpkg-query -W floodgate floodgate-dev >/dev/null 2>&1; then left+=("dpkg's database"); fi
((${#left[@]} == 0)) || { echo "check.sh: left after dpkg --purge: ${left[*]}" >&2; exit 1; }
echo "installed, served, purged: nothing left"

section "python3-floodgate: lintian, apt install, import from a clean shell, purge"
if ((${#pys[@]} == 1)); then
  py="${pys[0]}"
  cp "$py" "$work/" && chmod 0644 "$work/$(basename "$py")"
  setpriv --reuid=65534 --regid=65534 --clear-groups env HOME="$work" TMPDIR="$work" \
    lintian --fail-on error,warning --display-level '>=warning' "$work/$(basename "$py")"
  find /tmp -maxdepth 1 -name 'mldbm-*' -user 65534 -newer "$work/before-lintian" -exec rm -rf {} +
  installed=1
  apt-get install -y -q --no-install-recommends "$work/$(basename "$py")" >/dev/null
  # From an empty directory and environment, with Debian's interpreter: the installed module only.
  (cd "$work" && env -i PATH=/usr/bin:/bin /usr/bin/python3 -I -c '
import floodgate, floodgate.limits as limits
assert floodgate.__file__.startswith("/usr/lib/python3/dist-packages/floodgate/"), floodgate.__file__
window = limits.MovingWindowRateLimiter(limits.storage_from_string("memory://"))
item = limits.parse("2/minute")
decisions = [window.hit(item, "user", 42) for _ in range(3)]
assert decisions == [True, True, False], decisions
assert window.get_window_stats(item, "user", 42).remaining == 0
print("import floodgate.limits: 2/minute admitted", decisions)')
  dpkg --purge python3-floodgate >/dev/null
  installed=""
  if [[ -e /usr/lib/python3/dist-packages/floodgate ]] || dpkg-query -W python3-floodgate >/dev/null 2>&1; then
    echo "check.sh: left after dpkg --purge python3-floodgate: $(ls -d /usr/lib/python3/dist-packages/floodgate 2>/dev/null)" >&2
    exit 1
  fi
  echo "python3-floodgate: lintian clean, installed, imported, purged: nothing left"
elif grep -q '^pybind11_DIR:PATH=/' build/release/CMakeCache.txt 2>/dev/null; then
  echo "check.sh: the build has the Python module but $dist has no python3-floodgate_*.deb" >&2
  exit 1
fi

section "the image"
rootfs="$work/rootfs"
$here/image_check.py "$image" "$rootfs"
# envoyproxy/ratelimit's defaults (HOST 0.0.0.0, PORT 8080, RUNTIME_ROOT /srv/runtime_data/current,
# RUNTIME_APPDIRECTORY config) with a rule file there; the memory store stands in for its Redis.
mkdir -p "$rootfs/srv/runtime_data/current/config"
printf 'domain: check\ndescriptors:\n  - key: path\n    rate_limit: {unit: minute, requests_per_unit: 5}\n' \
  > "$rootfs/srv/runtime_data/current/config/rules.yaml"
$here/in_netns.py $here/serve_check.sh --chroot "$rootfs" --port 8080 --json check path /x \
  --env LOG_LEVEL=info -- /bin/ratelimit --storage memory
$here/in_netns.py $here/serve_check.sh --chroot "$rootfs" --port 8080 --hit api \
  -- /usr/bin/floodgate serve --config /etc/floodgate/floodgate.yaml --listen 0.0.0.0:8080

section "the Kubernetes manifests"
$here/manifests_test.py --image "$image" --self-check

section "the bills of materials"
$here/sbom_check.py "${deb%.deb}.spdx.json" "$deb" --depends "$deb"
$here/sbom_check.py "${image%.tar}.spdx.json" "$image" --image-root "$rootfs"
(cd "$dist" && sha256sum --quiet -c SHA256SUMS)
echo "packages, image, manifests and bills of materials: ok"
