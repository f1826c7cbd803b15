"""cluster/Dockerfile, checked without docker: the base image is Ray's own ray-llm build of the
pinned Ray, for a Python the project supports, and the image holds what the manifests run."""

from __future__ import annotations

import re
import tomllib

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.cluster.cluster_image import DOCKERFILE, ROOT, image

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pinned(name: str) -> Version:
    for line in PROJECT["dependencies"] + PROJECT["optional-dependencies"]["gpu"]:
        req = Requirement(line)
        if req.name == name:
            (spec,) = req.specifier
            assert spec.operator == "==", f"{name} is not pinned: {line}"
            return Version(spec.version)
    raise AssertionError(f"{name} is not declared")


def test_the_base_image_is_the_pinned_ray_for_a_supported_python() -> None:
    img = image()
    assert Version(img.ray) == pinned("ray")
    assert Version(img.python) in SpecifierSet(PROJECT["requires-python"])
    assert (
        img.cuda_major == 13
    )  # vLLM 0.29's torch; tests/cluster/test_gpu_resolve.py checks the wheels
    # the build asserts the same versions it was resolved with
    assert f"'{img.ray}'" in img.run and "'0.29.0'" in img.run
    assert "-e '.[gpu]'" in img.run


def test_the_image_holds_every_package_and_config_the_cluster_runs() -> None:
    img = image()
    for package in ("crow", "models", "indexes", "deployments", "jobs", "dashboard"):
        assert img.source_of(package) == ROOT / package, f"{package}/ is not in the image"
    # every config file a manifest names is in the image, at that path; a job's --config is
    # that or the serving cluster's dashboard (the args being served)
    named = []
    for manifest in sorted((ROOT / "cluster").glob("*.yaml")):
        text = manifest.read_text()
        named += re.findall(r"serve deploy (\S+\.ya?ml)", text)
        code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
        for value in re.findall(r"--config[= ]\"?([^\s\"]+)", code):
            if not value.startswith(("http://", "$")):
                named.append(value)
    assert named, "no manifest names a config file"
    for path in named:
        source = img.source_of(path)
        assert source is not None and source.is_file(), f"{path} is not in the image"


def pod_templates() -> list[tuple[str, dict]]:
    """(where, pod spec) of every pod template in the cluster's manifests."""
    pods = []
    for manifest in sorted((ROOT / "cluster").glob("*.yaml")):
        for doc in yaml.safe_load_all(manifest.read_text()):
            spec = (doc or {}).get("spec", {})
            if "template" in spec:
                pods.append((manifest.name, spec["template"]["spec"]))
            cluster = spec.get("rayClusterConfig") or spec.get("rayClusterSpec")
            if cluster:
                groups = [cluster["headGroupSpec"], *cluster.get("workerGroupSpecs", [])]
                pods += [
                    (f"{manifest.name}:{g.get('groupName', 'head')}", g["template"]["spec"])
                    for g in groups
                ]
    return pods


def test_every_pod_can_write_its_volumes() -> None:
    """The image runs as ray in group users (100): every pod with a volume makes it
    writable for that group (a fresh disk's root belongs to root)."""
    assert "--chown=ray:users" in DOCKERFILE.read_text()
    pods = pod_templates()
    assert len(pods) >= 6
    for where, pod in pods:
        if any("persistentVolumeClaim" in v for v in pod.get("volumes", [])):
            assert pod.get("securityContext", {}).get("fsGroup") == 100, where


def test_the_model_cache_is_a_mounted_volume() -> None:
    """HF_HOME points under the crow-models mount of every Ray container."""
    env = re.search(r"HF_HOME=(\S+)", (ROOT / "cluster" / "Dockerfile").read_text())
    assert env, "the image sets no HF_HOME"
    service = yaml.safe_load((ROOT / "cluster" / "rayservice.yaml").read_text())
    spec = service["spec"]["rayClusterConfig"]
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]]
    for group in groups:
        for container in group["template"]["spec"]["containers"]:
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert any(env.group(1).startswith(m) for m in mounts), (
                f"{container['name']}: HF_HOME {env.group(1)} is on no volume ({mounts})"
            )
