"""A deterministic fake ``Embedder`` for fast tests: hashed bag of words, normalized."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

_TOKEN = re.compile(r"\w+")


class HashEmbedder:
    """Each lowercase word adds +-1 to a hashed bucket; rows are L2-normalized.

    Texts sharing words score higher than texts that share none, which is enough to test
    retrieval plumbing without loading a model. Same text -> same vector, in every process.
    """

    def __init__(self, dim: int = 64, *, name: str = "hash-bow") -> None:
        if dim < 2:
            raise ValueError("dim must be at least 2")
        self.dim = dim
        self.name = f"{name}-{dim}"

    def _embed_one(self, text: str) -> np.ndarray:
        vec = np.zeros(self.dim, dtype=np.float32)
        tokens = _TOKEN.findall(text.lower()) or [""]
        for token in tokens:
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            value = int.from_bytes(digest, "little")
            vec[(value >> 1) % self.dim] += 1.0 if value & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:  # words cancelled out: fall back to a stable unit vector
            vec[0] = 1.0
            norm = 1.0
        return vec / norm

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._embed_one(t) for t in texts])
