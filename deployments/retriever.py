"""Retriever deployment: FAISS search per org x collection, hot-swapping new index versions."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from ray import serve

from crow.app import open_search
from crow.retrieval.sort_order import SortOrder
from crow.settings import AppSettings
from indexes.filters import SearchFilter


@serve.deployment(name="Retriever", max_ongoing_requests=64, ray_actor_options={"num_cpus": 0})
class RetrieverDeployment:
    def __init__(self, settings: AppSettings) -> None:
        self.service = open_search(settings)

    async def search(
        self,
        org_id: str,
        collection: str,
        vector: np.ndarray | None,
        *,
        k: int = 10,
        flt: SearchFilter | None = None,
        sort: SortOrder = "relevance",
        counted: SearchFilter | None = None,
    ) -> list[dict[str, Any]]:
        return await asyncio.to_thread(
            self.service.search,
            org_id,
            collection,
            vector,
            k=k,
            flt=flt,
            sort=sort,
            counted=counted,
        )

    async def refresh(self) -> dict[str, str]:
        """Called after a reindex: load newly published versions now."""
        return await asyncio.to_thread(self.service.refresh)

    async def readiness(self, org_id: str) -> dict[str, str | None]:
        return await asyncio.to_thread(self.service.readiness, org_id)

    async def product_categories(self, org_id: str) -> list[str]:
        return await asyncio.to_thread(self.service.product_categories, org_id)

    def versions(self) -> dict[str, str]:
        return self.service.versions()

    def check_health(self) -> None:
        if not self.service.store.root.exists():
            raise RuntimeError(f"index root {self.service.store.root} is missing")
