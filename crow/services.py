"""The services the request path awaits, in one bag (crow.app builds it): in one process
ThreadProxy facades over the components, under Serve DeploymentHandle facades."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from crow.chat.agent.context import ToolContext
from crow.data.lake import DataLake
from crow.facades import (
    AnalyticsFacade,
    ChatFacade,
    EmbedderFacade,
    IndexerFacade,
    RetrieverFacade,
    StoreFacade,
)
from crow.metrics import Metrics, NoMetrics
from crow.settings import AppSettings

F = TypeVar("F")


def need(facade: F | None, what: str) -> F:
    """`facade`, which the caller needs: an app built without it (a route test's, with the
    store alone) fails the request that reaches for it."""
    if facade is None:
        raise RuntimeError(f"this app was built without its {what}")
    return facade


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
    store: StoreFacade
    # None where the app runs without them (tests of the routes that need only the store).
    embedder: EmbedderFacade | None = None
    retriever: RetrieverFacade | None = None
    analytics: AnalyticsFacade | None = None
    indexer: IndexerFacade | None = None
    chat: ChatFacade | None = None
    metrics: Metrics = field(default_factory=NoMetrics)

    def tool_context(self, org_id: str) -> ToolContext:
        """A fresh per-request context for the tools: the org and what they reach."""
        return ToolContext(
            org_id,
            need(self.embedder, "embedder"),
            need(self.retriever, "retriever"),
            need(self.analytics, "analytics"),
        )
