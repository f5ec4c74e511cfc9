#!/usr/bin/python3
"""Software bills of materials: which Debian packages (and versions) floodgate links.

  sbom.py libs BINARY
      one line per shared library that `ldd BINARY` lists (and the dynamic loader):
      PATH <tab> PACKAGE <tab> VERSION <tab> ARCH, the Debian package that owns the file
  sbom.py spdx --binary BINARY --kind deb|image --artifact FILE --version V --commit C
               --epoch SECONDS [--extra-package NAME …] --out OUT.spdx.json
      an SPDX 2.3 JSON document: floodgate (the artifact, with its SHA-256) and every Debian
      package of those libraries, with its version and a purl; the package DEPENDS_ON them (dpkg
      installs them), the image CONTAINS them (copied into its layer). --extra-package adds one
      more Debian package by name (the image's CA bundle: ca-certificates).

Standard library only; the JSON is written by hand to SPDX 2.3's schema (no spdx-tools here).
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import uuid
from datetime import datetime, timezone


def ldd_paths(binary):
    """The files the loader maps for BINARY: each resolved library, then the loader itself."""
    out = subprocess.run(["ldd", binary], check=True, capture_output=True, text=True).stdout
    paths = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
            paths.append(parts[2])
        elif parts and parts[0].startswith("/"):
            paths.append(parts[0])
    return paths


def owners(paths):
    """path -> package name, through one `dpkg -S` over each path and its usr-merged twin
    (Debian 12 installs /lib as a link to /usr/lib; dpkg knows a file under the name its package
    shipped it with)."""
    def variants(p):
        real = os.path.realpath(p)
        out = []
        for q in (p, real):
            out += [q, "/usr" + q] if not q.startswith("/usr/") else [q, q[len("/usr"):]]
        return out

    queries = sorted({v for p in paths for v in variants(p)})
    res = subprocess.run(["dpkg", "-S"] + queries, capture_output=True, text=True)
    found = {}
    for line in res.stdout.splitlines():
        pkg, _, path = line.partition(": ")
        for p in path.split(", "):
            found[p.strip()] = pkg.split(", ")[0].split(":")[0]
    result = {}
    for p in paths:
        pkg = next((found[v] for v in variants(p) if v in found), None)
        if pkg is None:
            sys.exit(f"sbom.py: no Debian package owns {p}")
        result[p] = pkg
    return result


def versions(packages):
    """package -> (version, architecture), from dpkg's database."""
    if not packages:
        return {}
    res = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Version}\t${Architecture}\n"] + sorted(packages),
                         check=True, capture_output=True, text=True)
    return {name: (version, arch) for name, version, arch in (l.split("\t") for l in res.stdout.splitlines())}


def libs(binary):
    paths = ldd_paths(binary)
    own = owners(paths)
    ver = versions(set(own.values()))
    return [(p, own[p], *ver[own[p]]) for p in paths]


def spdx_id(name):
    return "SPDXRef-Package-" + "".join(c if c.isalnum() or c in ".-" else "-" for c in name)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def spdx(args):
    rows = libs(args.binary)
    packages = {pkg: (version, arch) for _, pkg, version, arch in rows}
    packages.update(versions(set(args.extra_package)))
    files_of = {}
    for path, pkg, _, _ in rows:
        files_of.setdefault(pkg, []).append(path)
    digest = sha256(args.artifact)
    created = datetime.fromtimestamp(args.epoch, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    arch = subprocess.run(["dpkg", "--print-architecture"], check=True, capture_output=True, text=True).stdout.strip()
    kind = {"deb": "Debian package", "image": "OCI image"}[args.kind]
    name = f"floodgate-{args.kind}-{args.version}"
    main = {
        "SPDXID": "SPDXRef-Package-floodgate",
        "name": "floodgate",
        "versionInfo": args.version,
        "packageFileName": os.path.basename(args.artifact),
        "supplier": "Organization: The floodgate authors",
        "downloadLocation": "NOASSERTION",
        "filesAnalyzed": False,
        "checksums": [{"algorithm": "SHA256", "checksumValue": digest}],
        "licenseConcluded": "Apache-2.0",
        "licenseDeclared": "Apache-2.0",
        "copyrightText": "2026 The floodgate authors",
        "primaryPackagePurpose": "APPLICATION" if args.kind == "deb" else "CONTAINER",
        "comment": f"{kind} built from commit {args.commit}",
    }
    if args.kind == "deb":
        main["externalRefs"] = [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                                 "referenceLocator": f"pkg:deb/floodgate@{args.version}?arch={arch}"}]
    else:
        main["externalRefs"] = [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                                 "referenceLocator": f"pkg:oci/floodgate@sha256%3A{digest}?tag={args.version}"}]
    doc_packages = [main]
    relationships = [{"spdxElementId": "SPDXRef-DOCUMENT", "relationshipType": "DESCRIBES",
                      "relatedSpdxElement": main["SPDXID"]}]
    for pkg in sorted(packages):
        version, parch = packages[pkg]
        entry = {
            "SPDXID": spdx_id(pkg),
            "name": pkg,
            "versionInfo": version,
            "supplier": "Organization: Debian",
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": False,
            "licenseConcluded": "NOASSERTION",
            "licenseDeclared": "NOASSERTION",
            "copyrightText": "NOASSERTION",
            "primaryPackagePurpose": "LIBRARY" if pkg in files_of else "DATA",
            "externalRefs": [{"referenceCategory": "PACKAGE-MANAGER", "referenceType": "purl",
                              "referenceLocator": f"pkg:deb/debian/{pkg}@{version}?arch={parch}&distro=debian-12"}],
        }
        if pkg in files_of:
            entry["comment"] = "provides " + ", ".join(files_of[pkg])
        doc_packages.append(entry)
        relationships.append({"spdxElementId": main["SPDXID"],
                              "relationshipType": "DEPENDS_ON" if args.kind == "deb" else "CONTAINS",
                              "relatedSpdxElement": entry["SPDXID"]})
    doc = {
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": name,
        "documentNamespace": f"https://spdx.org/spdxdocs/{name}-{uuid.uuid5(uuid.NAMESPACE_URL, digest)}",
        "creationInfo": {"created": created, "creators": ["Tool: floodgate packaging/sbom.py"]},
        "packages": doc_packages,
        "relationships": relationships,
    }
    with open(args.out, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(f"sbom: {args.out} ({len(packages)} Debian packages)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("libs")
    p.add_argument("binary")
    p = sub.add_parser("spdx")
    p.add_argument("--binary", required=True)
    p.add_argument("--kind", choices=["deb", "image"], required=True)
    p.add_argument("--artifact", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--epoch", type=int, required=True)
    p.add_argument("--extra-package", action="append", default=[])
    p.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.command == "libs":
        for row in libs(args.binary):
            print("\t".join(row))
    else:
        spdx(args)


if __name__ == "__main__":
    main()
