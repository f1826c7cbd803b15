"""What the HTTP layer needs, injected once: in-process objects in tests, handles under Serve."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from crow.datalake import DataLake
from crow.metrics import Metrics, NoMetrics
from crow.settings import AppSettings


class ThreadProxy:
    """Async facade over a blocking object: ``await proxy.method(...)`` runs it in a thread.

    The Serve graph puts a DeploymentHandle facade with the same shape in its place.
    """

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        method = getattr(self._target, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(method, *args, **kwargs)

        return call


@dataclass(frozen=True)
class Services:
    """Async facades (``await x.method(...)``) over the app's components."""

    settings: AppSettings
    lake: DataLake
    store: Any  # crow.store.chat_store.ChatStore
    embedder: Any = None  # models.embedder.Embedder (embed, dim)
    retriever: Any = None  # crow.search.SearchService
    analytics: Any = None  # crow.analytics.Analytics
    indexer: Any = None  # crow.indexer.Indexer (already async)
    chat: Any = None  # crow.chat.ChatService: send / send_events (already async)
    metrics: Metrics = field(default_factory=NoMetrics)
