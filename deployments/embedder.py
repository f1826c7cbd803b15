"""Embedder deployment: sentence-transformers behind Serve's dynamic request batching."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from ray import serve

from crow.settings import AppSettings
from models.embedder import Embedder, SentenceTransformerEmbedder


@serve.deployment(name="Embedder", max_ongoing_requests=128, ray_actor_options={"num_cpus": 0})
class EmbedderDeployment:
    def __init__(
        self,
        settings: AppSettings,
        *,
        backend_cls: type[SentenceTransformerEmbedder] = SentenceTransformerEmbedder,
    ) -> None:
        cfg = settings.embedder
        self.embedder: Embedder = backend_cls.from_settings(cfg)
        # Ray types @serve.batch's wrapper without the setters it has.
        self._embed_batch.set_max_batch_size(cfg.max_batch_size)  # type: ignore[attr-defined]
        self._embed_batch.set_batch_wait_timeout_s(cfg.batch_wait_timeout_s)  # type: ignore[attr-defined]

    @serve.batch(max_batch_size=32, batch_wait_timeout_s=0.01)
    async def _embed_batch(self, texts: list[str]) -> list[np.ndarray]:
        # Requests arriving together are encoded in one forward pass, off the event loop.
        return list(await asyncio.to_thread(self.embedder.embed, texts))

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return np.stack(await asyncio.gather(*(self._embed_batch(t) for t in texts)))

    async def embed_rows(self, texts: list[str]) -> np.ndarray:
        """A reindex batch: one encode call off the event loop (no per-text batching)."""
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        return await asyncio.to_thread(self.embedder.embed, texts)

    def info(self) -> dict[str, Any]:
        return {"model": self.embedder.name, "dim": self.embedder.dim}

    def check_health(self) -> None:
        if self.embedder.dim <= 0:
            raise RuntimeError("embedder not loaded")
