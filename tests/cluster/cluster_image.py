"""What cluster/Dockerfile builds, read from the file (docker cannot run here): the base
image's Ray, Python and CUDA, the working directory, and which repository paths it copies."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from tests.repo import ROOT

DOCKERFILE = ROOT / "cluster" / "Dockerfile"
BASE = re.compile(
    r"^rayproject/ray-llm:(?P<ray>\d+\.\d+\.\d+)-py(?P<py>\d)(?P<pyminor>\d+)-cu(?P<cuda>\d+)$"
)


@dataclass(frozen=True)
class Image:
    base: str
    ray: str
    python: str
    cuda_major: int
    workdir: PurePosixPath
    copies: dict[PurePosixPath, Path]
    """Path in the image -> what it holds from the repository."""
    run: str

    def source_of(self, path: str) -> Path | None:
        """The repository file or folder that provides `path` in the image, if any."""
        target = PurePosixPath(path)
        if not target.is_absolute():
            target = self.workdir / target
        for dest, src in self.copies.items():
            if target == dest or dest in target.parents:
                return src / target.relative_to(dest)
        return None


@cache
def image() -> Image:
    lines = DOCKERFILE.read_text().replace("\\\n", " ").splitlines()
    instructions = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    froms = [i.split()[1] for i in instructions if i.upper().startswith("FROM ")]
    assert len(froms) == 1, f"one build stage expected, got FROM {froms}"
    m = BASE.match(froms[0])
    assert m, f"base image {froms[0]!r} is not a rayproject/ray-llm:<ray>-py<XY>-cu<NNN> tag"
    workdir = PurePosixPath("/")
    copies: dict[PurePosixPath, Path] = {}
    runs = []
    for ins in instructions:
        word, _, rest = ins.partition(" ")
        if word.upper() == "WORKDIR":
            workdir = workdir / rest.strip()
        elif word.upper() == "COPY":
            args = [a for a in shlex.split(rest) if not a.startswith("--")]
            *sources, dest = args
            into_folder = dest.endswith("/") or dest == "."
            assert into_folder or len(sources) == 1, f"COPY of several files to a file: {ins}"
            for src in sources:
                name = PurePosixPath(src).name if into_folder else ""
                copies[workdir / dest / name if name else workdir / dest] = ROOT / src
        elif word.upper() == "RUN":
            runs.append(rest)
    return Image(
        base=froms[0],
        ray=m["ray"],
        python=f"{m['py']}.{m['pyminor']}",
        cuda_major=int(m["cuda"]) // 10,
        workdir=workdir,
        copies=copies,
        run="\n".join(runs),
    )
