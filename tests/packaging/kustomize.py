"""The subset of kustomize that packaging/kubernetes uses, for machines without kubectl (Debian 12
has no kubectl package): a Kustomization's or Component's `resources` (files and kustomization
directories), `components`, `labels` (pairs on each resource's metadata; with includeSelectors
also on the selectors and pod templates), `images` (newName, newTag) and `patches` given by `path`
(a strategic merge of maps by kind and name; lists are replaced whole). Anything else in a
kustomization is refused, so that a manifest using more fails here instead of rendering wrong.
"""
import copy
import os

import yaml

KNOWN = {"apiVersion", "kind", "resources", "components", "labels", "images", "patches"}


class KustomizeError(Exception):
    pass


def _read_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def _merge(into, patch):
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = copy.deepcopy(v)


def _containers(doc):
    spec = doc.get("spec", {})
    template = spec.get("template", {}).get("spec", spec.get("jobTemplate", {}).get("spec", {}))
    pod = template if "containers" in template else spec
    return pod.get("containers", []) + pod.get("initContainers", [])


def _apply_labels(doc, pairs, include_selectors):
    doc.setdefault("metadata", {}).setdefault("labels", {}).update(pairs)
    if not include_selectors:
        return
    spec = doc.get("spec", {})
    if isinstance(spec.get("selector"), dict):
        target = spec["selector"].setdefault("matchLabels", {}) if doc.get("kind") != "Service" else spec["selector"]
        target.update(pairs)
    if "template" in spec:
        spec["template"].setdefault("metadata", {}).setdefault("labels", {}).update(pairs)


def _apply_images(doc, images):
    for c in _containers(doc):
        name, _, _ = c.get("image", "").partition(":")
        for image in images:
            if image.get("name") == name:
                c["image"] = image.get("newName", name) + (":" + str(image["newTag"]) if "newTag" in image else "")


def build(directory):
    """The documents `kubectl kustomize DIRECTORY` would print, for the subset above."""
    path = os.path.join(directory, "kustomization.yaml")
    if not os.path.isfile(path):
        raise KustomizeError(f"{directory}: no kustomization.yaml")
    k = _read_docs(path)[0]
    unknown = set(k) - KNOWN
    if unknown:
        raise KustomizeError(f"{path}: {sorted(unknown)} are beyond this renderer; install kubectl")
    docs = []
    for r in k.get("resources", []):
        full = os.path.normpath(os.path.join(directory, r))
        docs.extend(build(full) if os.path.isdir(full) else _read_docs(full))
    for c in k.get("components", []):
        docs.extend(build(os.path.normpath(os.path.join(directory, c))))
    for p in k.get("patches", []):
        if set(p) != {"path"}:
            raise KustomizeError(f"{path}: only patches by path are rendered here")
        for patch in _read_docs(os.path.join(directory, p["path"])):
            key = (patch.get("kind"), patch.get("metadata", {}).get("name"))
            targets = [d for d in docs if (d.get("kind"), d.get("metadata", {}).get("name")) == key]
            if not targets:
                raise KustomizeError(f"{path}: patch {p['path']} matches no {key[0]} {key[1]}")
            for d in targets:
                _merge(d, patch)
    for label in k.get("labels", []):
        for d in docs:
            _apply_labels(d, label.get("pairs", {}), label.get("includeSelectors", False))
    for d in docs:
        _apply_images(d, k.get("images", []))
    return docs
