#!/usr/bin/python3
"""image_check.py ARCHIVE ROOTFS: checks the OCI archive that scripts/package.sh built, and
extracts its root file system into ROOTFS (an empty or missing directory) for the run checks.

- the layout (OCI image-spec v1): oci-layout, index.json -> manifest -> config and layers, every
  blob's SHA-256 and size as its descriptor says, the config's diff_ids those of the layers;
- the config: user 65534:65534, the entrypoint and ports;
- the file list: exactly the program, /bin/ratelimit linking to it, the shared libraries that the
  image's own dynamic loader lists for it (run inside ROOTFS, so a library missing from the image
  or one too many fails), the configuration, passwd/group/nsswitch, the CA bundle and the
  copyright files; no shell;
- the size: printed, and over MAX_* it fails (a library set that grew by accident).
"""
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

MAX_COMPRESSED = 24 << 20    # bytes of the archive (16 MB today)
MAX_UNCOMPRESSED = 56 << 20  # bytes of the layer's files (40 MB today)
failures = []


def fail(msg):
    failures.append(msg)
    print(f"image: FAIL {msg}", file=sys.stderr)


def blob(oci, descriptor):
    algorithm, digest = descriptor["digest"].split(":")
    data = oci.extractfile(f"blobs/{algorithm}/{digest}").read()
    if hashlib.sha256(data).hexdigest() != digest:
        fail(f"blob {digest[:12]}: its SHA-256 is not its name")
    if len(data) != descriptor["size"]:
        fail(f"blob {digest[:12]}: {len(data)} bytes, its descriptor says {descriptor['size']}")
    return data


def main(archive, rootfs):
    with tarfile.open(archive) as oci:
        layout = json.loads(oci.extractfile("oci-layout").read())
        if layout.get("imageLayoutVersion") != "1.0.0":
            fail(f"oci-layout: {layout}")
        index = json.loads(oci.extractfile("index.json").read())
        [mdesc] = index["manifests"]
        if mdesc["mediaType"] != "application/vnd.oci.image.manifest.v1+json":
            fail(f"index.json: manifest media type {mdesc['mediaType']}")
        manifest = json.loads(blob(oci, mdesc))
        config = json.loads(blob(oci, manifest["config"]))
        layers = [blob(oci, d) for d in manifest["layers"]]
    if len(layers) != 1:
        fail(f"{len(layers)} layers, expected 1")
    raw = gzip.decompress(layers[0]) if manifest["layers"][0]["mediaType"].endswith("+gzip") else layers[0]
    if config["rootfs"]["diff_ids"] != ["sha256:" + hashlib.sha256(raw).hexdigest()]:
        fail("config: diff_ids are not the layer's")
    c = config["config"]
    expect = {"User": "65534:65534", "Entrypoint": ["/usr/bin/floodgate"],
              "Cmd": ["serve", "--config", "/etc/floodgate/floodgate.yaml", "--listen", "0.0.0.0:8080"]}
    for k, v in expect.items():
        if c.get(k) != v:
            fail(f"config: {k} is {c.get(k)!r}, expected {v!r}")
    if set(c.get("ExposedPorts", {})) != {"8080/tcp", "8081/tcp"}:
        fail(f"config: ExposedPorts {c.get('ExposedPorts')}")

    os.makedirs(rootfs, exist_ok=True)
    if os.listdir(rootfs):
        sys.exit(f"image: {rootfs} is not empty")
    uncompressed = 0
    with tarfile.open(fileobj=io.BytesIO(raw)) as layer:
        members = layer.getmembers()
        for m in members:
            if m.uid != 0 or m.gid != 0:
                fail(f"{m.name}: owned by {m.uid}:{m.gid}, not root")
            if m.mode & 0o022 and not m.issym():
                fail(f"{m.name}: writable by group or others ({oct(m.mode)})")
            uncompressed += m.size
        layer.extractall(rootfs, numeric_owner=True)
    files = {"/" + os.path.normpath(m.name): m for m in members if not m.isdir()}

    # What the image's own loader maps for the program, inside the image (chroot: the host's
    # libraries are out of reach, so one missing from the image shows as "not found").
    loader = "/lib64/ld-linux-x86-64.so.2" if os.path.exists(rootfs + "/lib64/ld-linux-x86-64.so.2") else None
    if loader is None:
        fail("no dynamic loader at /lib64/ld-linux-x86-64.so.2")
        listed = set()
    else:
        out = subprocess.run(["chroot", rootfs, loader, "--list", "/usr/bin/floodgate"],
                             capture_output=True, text=True)
        if out.returncode != 0 or "not found" in out.stdout:
            fail(f"the image's loader cannot resolve the program's libraries:\n{out.stdout}{out.stderr}")
        listed = {loader}
        for line in out.stdout.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
                listed.add(os.path.normpath(parts[2]))
    fixed = {"/usr/bin/floodgate", "/bin/ratelimit", "/etc/floodgate/floodgate.yaml", "/etc/passwd",
             "/etc/group", "/etc/nsswitch.conf", "/etc/ssl/certs/ca-certificates.crt", "/usr/lib/ssl/cert.pem",
             "/usr/share/zoneinfo/Europe/Berlin", "/usr/share/zoneinfo/UTC"}
    for path in sorted(fixed - set(files)):
        fail(f"missing {path}")
    for path in sorted(listed - set(files)):
        fail(f"the loader lists {path}, which is not a file of the image")
    # The IANA time zones of calendar limits (Debian's tzdata), without the leap-second copies.
    zones = [p for p in files if p.startswith("/usr/share/zoneinfo/")]
    for path in sorted(p for p in zones if p.startswith("/usr/share/zoneinfo/right/")):
        fail(f"unexpected file {path} (the leap-second zones are not used)")
    extra = [p for p in sorted(files) if p not in fixed and p not in listed
             and not p.startswith("/usr/share/zoneinfo/")
             and not (p.startswith("/usr/share/doc/") and p.endswith("/copyright"))]
    for path in extra:
        fail(f"unexpected file {path} (not the program, a library it links, or its configuration)")
    link = files.get("/bin/ratelimit")
    if link is not None and not (link.issym() and link.linkname == "/usr/bin/floodgate"):
        fail("/bin/ratelimit is not a link to /usr/bin/floodgate")
    for shell in ("/bin/sh", "/bin/bash", "/usr/bin/sh", "/bin/busybox"):
        if shell in files:
            fail(f"a shell: {shell}")
    passwd = open(rootfs + "/etc/passwd").read()
    if "nobody:x:65534:65534:" not in passwd:
        fail("/etc/passwd has no nobody (65534)")

    compressed = os.path.getsize(archive)
    libs = sum(files[p].size for p in listed if p in files)
    print(f"image: {len(files)} files ({len(listed) - 1} shared libraries and the loader: "
          f"{libs / 2**20:.1f} MiB; the program {files['/usr/bin/floodgate'].size / 2**20:.1f} MiB); "
          f"archive {compressed / 2**20:.1f} MiB, layer {uncompressed / 2**20:.1f} MiB uncompressed")
    if compressed > MAX_COMPRESSED:
        fail(f"archive {compressed} bytes > {MAX_COMPRESSED}")
    if uncompressed > MAX_UNCOMPRESSED:
        fail(f"layer {uncompressed} bytes > {MAX_UNCOMPRESSED}")
    if failures:
        sys.exit(f"image: {len(failures)} failures")
    print("image: layout, digests, config and file list ok")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
