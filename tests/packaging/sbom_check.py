#!/usr/bin/python3
"""sbom_check.py SPDX.json ARTIFACT [--depends DEB] [--image-root DIR]

Checks a bill of materials that scripts/package.sh wrote: SPDX 2.3's required fields, the
artifact's SHA-256, and that it names every Debian package it must, at the installed version:
--depends DEB: every package in the .deb's Depends (dpkg-shlibdeps' list of the libraries it
links; a virtual name as the installed package that provides it); --image-root DIR: the package of every shared library in the image's root file system.
"""
import argparse
import hashlib
import os
import subprocess
import sys

import json

p = argparse.ArgumentParser()
p.add_argument("spdx")
p.add_argument("artifact")
p.add_argument("--depends")
p.add_argument("--image-root")
args = p.parse_args()
doc = json.load(open(args.spdx))
errors = []
for key in ("spdxVersion", "dataLicense", "SPDXID", "name", "documentNamespace", "creationInfo", "packages"):
    if key not in doc:
        errors.append(f"no {key}")
if doc.get("spdxVersion") != "SPDX-2.3" or doc.get("dataLicense") != "CC0-1.0":
    errors.append(f"spdxVersion/dataLicense: {doc.get('spdxVersion')}, {doc.get('dataLicense')}")
packages = {pkg["name"]: pkg for pkg in doc.get("packages", [])}
ids = {pkg["SPDXID"] for pkg in doc.get("packages", [])}
for pkg in doc.get("packages", []):
    for key in ("SPDXID", "name", "downloadLocation", "versionInfo"):
        if key not in pkg:
            errors.append(f"package {pkg.get('name')}: no {key}")
for r in doc.get("relationships", []):
    for end in (r["spdxElementId"], r["relatedSpdxElement"]):
        if end != "SPDXRef-DOCUMENT" and end not in ids:
            errors.append(f"relationship to unknown {end}")
digest = hashlib.sha256(open(args.artifact, "rb").read()).hexdigest()
main = packages.get("floodgate", {})
if {"algorithm": "SHA256", "checksumValue": digest} not in main.get("checksums", []):
    errors.append(f"floodgate's checksum is not {os.path.basename(args.artifact)}'s")

wanted = set()
if args.depends:
    depends = subprocess.run(["dpkg-deb", "-f", args.depends, "Depends"], check=True, capture_output=True,
                             text=True).stdout
    # A name may be virtual (libspdlog1.10's shlibs ask for libspdlog1.10-fmt9, which it Provides).
    provides = {}
    for line in subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Provides}\n"], check=True,
                               capture_output=True, text=True).stdout.splitlines():
        pkg, _, virtual = line.partition("\t")
        provides[pkg] = pkg
        for v in filter(None, (x.strip().split()[0] for x in virtual.split(",") if x.strip())):
            provides.setdefault(v, pkg)
    wanted |= {provides.get(n, n) for n in (d.strip().split()[0] for d in depends.split(",") if d.strip())}
if args.image_root:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "packaging"))
    import sbom
    libs = []
    for d, _, files in os.walk(args.image_root):
        libs += [os.path.join(d, f)[len(args.image_root):] for f in files if ".so" in f]
    wanted |= set(sbom.owners(libs).values())
installed = dict(l.split("\t") for l in subprocess.run(
    ["dpkg-query", "-W", "-f=${Package}\t${Version}\n"] + sorted(wanted), capture_output=True, text=True).stdout.splitlines())
for name in sorted(wanted):
    if name not in packages:
        errors.append(f"{name} is not listed")
    elif packages[name]["versionInfo"] != installed.get(name):
        errors.append(f"{name} {packages[name]['versionInfo']}, installed {installed.get(name)}")
if errors:
    sys.exit(f"sbom: FAIL {args.spdx}: " + "; ".join(errors))
print(f"sbom: {os.path.basename(args.spdx)}: SPDX 2.3, {len(packages) - 1} Debian packages, "
      f"every one of the {len(wanted)} expected at its installed version")
