#!/usr/bin/env bash
# The container image (OCI), built from the Debian package's files without a registry or a
# container engine: buildah from scratch, one layer, committed to an OCI archive.
#   packaging/image/build-image.sh FLOODGATE.deb OUT.tar VERSION COMMIT EPOCH
# The layer holds:
#   /usr/bin/floodgate, and /bin/ratelimit -> /usr/bin/floodgate (invoked by that name it runs as
#     `floodgate serve --envoyproxy-env`: Envoy Gateway's command is ["/bin/ratelimit"])
#   exactly the shared libraries `ldd` lists for it, at the paths it lists, and the dynamic loader
#   /etc/floodgate/floodgate.yaml (the package's; the image's command listens on 0.0.0.0:8080)
#   /etc/passwd and /etc/group: root, and nobody/nogroup (65534), the user it runs as; no shell
#   /etc/nsswitch.conf (hosts from /etc/hosts, then DNS: a Redis or memcached by name)
#   the CA bundle (/etc/ssl/certs/ca-certificates.crt, and OpenSSL's default /usr/lib/ssl/cert.pem
#     pointing at it): rediss:// to a server with a public certificate needs no REDIS_TLS_CACERT
#   /usr/share/zoneinfo (Debian's tzdata): the IANA time zones of calendar limits
#   /usr/share/doc/<package>/copyright of every Debian package a file comes from (their licences
#     travel with their binaries)
# Files are owned by root and dated EPOCH (the commit's time), so the same commit gives the same layer.
set -euo pipefail
deb="$(realpath "$1")"; out="$(realpath -m "$2")"; version="$3"; commit="$4"; epoch="$5"
# An image tag allows [A-Za-z0-9_.-] only: a build between tags (0.1.0-dev.508+g4c434ec) is tagged
# with '-' for '+' (0.1.0-dev.508-g4c434ec); a release's tag is its version (0.1.0).
tag="${version//+/-}"
command -v buildah >/dev/null || { echo "build-image.sh: buildah is missing (apt-get install buildah)" >&2; exit 1; }
work="$(mktemp -d)"
bh=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)
cleanup() {
  "${bh[@]}" rm -a >/dev/null 2>&1 || true
  "${bh[@]}" rmi -a -f >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

dpkg-deb -x "$deb" "$work/deb"
root="$work/rootfs"
mkdir -p "$root"/{bin,etc/floodgate,etc/ssl/certs,usr/bin,usr/lib/ssl}
install -m 0755 "$work/deb/usr/bin/floodgate" "$root/usr/bin/floodgate"
ln -s /usr/bin/floodgate "$root/bin/ratelimit"
install -m 0644 "$work/deb/etc/floodgate/floodgate.yaml" "$root/etc/floodgate/floodgate.yaml"

# The libraries: `ldd` resolves each one as the loader will (by SONAME, through the host's
# ld.so.cache); the file is copied under the name and directory it resolved to, which is on the
# loader's default path, so the image needs no ld.so.cache. sbom.py names each one's package.
here="$(cd "$(dirname "$0")/.." && pwd)"
packages=(ca-certificates)
while IFS=$'\t' read -r path pkg _; do
  mkdir -p "$root$(dirname "$path")"
  cp -L "$path" "$root$path"
  packages+=("$pkg")
done < <("$here/sbom.py" libs "$root/usr/bin/floodgate")
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' \
  > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' > "$root/etc/nsswitch.conf"
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
ln -s /etc/ssl/certs/ca-certificates.crt "$root/usr/lib/ssl/cert.pem"
mkdir -p "$root/usr/share"
cp -a /usr/share/zoneinfo "$root/usr/share/zoneinfo"
rm -rf "$root/usr/share/zoneinfo/right"  # the zones again with leap seconds: unused (POSIX time)
packages+=(tzdata)
for pkg in $(printf '%s\n' "${packages[@]}" | sort -u); do
  mkdir -p "$root/usr/share/doc/$pkg"
  cp -L "/usr/share/doc/$pkg/copyright" "$root/usr/share/doc/$pkg/copyright"
done
mkdir -p "$root/usr/share/doc/floodgate"
cp "$work/deb/usr/share/doc/floodgate/copyright" "$root/usr/share/doc/floodgate/copyright"

find "$root" -type d -exec chmod 0755 {} +
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" --clamp-mtime \
  -C "$root" -cf "$work/layer.tar" .

c="$("${bh[@]}" from --quiet scratch)"
"${bh[@]}" add "$c" "$work/layer.tar" / >/dev/null
"${bh[@]}" config \
  --user 65534:65534 --workingdir / --os linux --arch "$(dpkg --print-architecture)" \
  --entrypoint '["/usr/bin/floodgate"]' \
  --cmd '["serve", "--config", "/etc/floodgate/floodgate.yaml", "--listen", "0.0.0.0:8080"]' \
  --port 8080/tcp --port 8081/tcp \
  --label org.opencontainers.image.title=floodgate \
  --label org.opencontainers.image.description="Rate-limit service: HTTP API, nginx auth_request, Envoy RateLimitService (also as /bin/ratelimit)" \
  --label org.opencontainers.image.version="$version" \
  --label org.opencontainers.image.revision="$commit" \
  --label org.opencontainers.image.licenses=Apache-2.0 \
  --created-by "packaging/image/build-image.sh" "$c"
rm -f "$out"
"${bh[@]}" commit --quiet --format oci --disable-compression=false --timestamp "$epoch" \
  "$c" "oci-archive:$out:floodgate:$tag" >/dev/null
echo "image: $out, tagged floodgate:$tag ($(du -k "$out" | cut -f1) KiB; layer $(du -k "$work/layer.tar" | cut -f1) KiB uncompressed)"
