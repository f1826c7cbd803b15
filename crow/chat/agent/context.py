"""What a tool call can reach: the org, its data services, and a per-request embedding cache."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from crow.facades import AnalyticsFacade, EmbedderFacade, RetrieverFacade


@dataclass
class ToolContext:
    """Per request. Services are async facades (in-process objects or Serve handles)."""

    org_id: str
    embedder: EmbedderFacade
    retriever: RetrieverFacade
    analytics: AnalyticsFacade
    question: str = ""
    """The user's question this request answers, if any (a knowledge-base search picks the
    sentence that answers it: a small model's query is often only the topic)."""
    earlier: str = ""
    """The user's question before it, if any: what a follow-up ("what about kayaks?") asks
    again about a new subject."""
    _vectors: dict[str, asyncio.Task[np.ndarray]] = field(default_factory=dict)
    _anchor: asyncio.Task[datetime | None] | None = None

    async def embed(self, text: str) -> np.ndarray:
        """The query's vector; the same text is embedded once per request, even in parallel."""
        key = " ".join(text.split()).lower()
        if key not in self._vectors:
            self._vectors[key] = asyncio.ensure_future(self._embed_one(key))
        return await self._vectors[key]

    async def _embed_one(self, text: str) -> np.ndarray:
        vector: np.ndarray = (await self.embedder.embed([text]))[0]
        return vector

    @property
    def embed_calls(self) -> int:
        return len(self._vectors)

    async def anchor(self) -> datetime | None:
        """The latest time in the org's data: what 'last week' counts back from."""
        if self._anchor is None:
            self._anchor = asyncio.ensure_future(self._latest())
        return await self._anchor

    async def _latest(self) -> datetime | None:
        _, latest = await self.analytics.data_time_range(self.org_id)
        return latest
