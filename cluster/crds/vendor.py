"""Vendor KubeRay's CRD schemas: the openAPIV3Schema of the served v1 version of each CRD,
with every `description` keyword removed and keys sorted (nothing else changes).

    python cluster/crds/vendor.py <kuberay git dir, bare or not> v1.7.0

reads ray-operator/config/crd/bases/ray.io_<plural>.yaml at TAG with `git show` and writes
cluster/crds/ray.io_v1_<kind>.json beside this script; it prints the tag's commit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
CRD_DIR = "ray-operator/config/crd/bases"
CRDS = {"rayservices": "rayservice", "rayjobs": "rayjob", "rayclusters": "raycluster"}
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf")


def strip_descriptions(node: Any) -> Any:
    """A schema node without `description` keywords; a property *named* description stays."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key == "properties":
            out[key] = {name: strip_descriptions(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = strip_descriptions(value)
        elif key in SCHEMA_LISTS:
            out[key] = [strip_descriptions(sub) for sub in value]
        else:
            out[key] = value
    return out


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args], check=True, capture_output=True, text=True
    ).stdout


def v1_schema(crd: dict[str, Any]) -> dict[str, Any]:
    for version in crd["spec"]["versions"]:
        if version["name"] == "v1" and version.get("served"):
            return version["schema"]["openAPIV3Schema"]
    raise SystemExit(f"{crd['metadata']['name']}: no served v1 version")


def main(git_dir: str, tag: str) -> None:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    commit = git(git_dir, "rev-parse", f"{tag}^{{commit}}").strip()
    print(f"kuberay {tag} = commit {commit}")
    for plural, kind in CRDS.items():
        source = f"{CRD_DIR}/ray.io_{plural}.yaml"
        crd = yaml.load(git(git_dir, "show", f"{tag}:{source}"), Loader=loader)
        target = HERE / f"ray.io_v1_{kind}.json"
        text = json.dumps(strip_descriptions(v1_schema(crd)), indent=1, sort_keys=True)
        target.write_text(text + "\n")
        print(f"{source} -> {target.name} ({target.stat().st_size} bytes)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: vendor.py KUBERAY_GIT_DIR TAG")
    main(sys.argv[1], sys.argv[2])
