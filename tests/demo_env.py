"""A seeded, indexed demo data set (hash embedder) for tests that need real tool results."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crow.analytics import Analytics
from crow.datalake import DataLake
from crow.indexing import INDEX_COLLECTIONS, build_index
from crow.search import SearchService
from crow.services import ThreadProxy
from crow.settings import AppSettings
from indexes.store import IndexStore
from jobs.seed_demo import main as seed
from models.testing_embed import HashEmbedder

ORGS = ("acme-outdoor", "fresh-mart")


@dataclass
class DemoEnv:
    settings: AppSettings
    lake: DataLake
    search: SearchService
    embedder: HashEmbedder
    analytics: Analytics

    def proxies(self) -> dict[str, ThreadProxy]:
        return {"embedder": ThreadProxy(self.embedder), "retriever": ThreadProxy(self.search),
                "analytics": ThreadProxy(self.analytics)}  # fmt: skip


def build_demo_env(var: Path, *, interactions: int = 3000) -> DemoEnv:
    seed(
        [
            "--data-root",
            str(var / "data"),
            "--end",
            "2026-11-29",
            "--interactions",
            str(interactions),
        ]
    )
    settings = AppSettings.from_args({"var_dir": str(var)})
    lake, index_store, embedder = (
        DataLake(settings.data_dir),
        IndexStore(settings.index_dir),
        HashEmbedder(),
    )
    for org in ORGS:
        for collection in INDEX_COLLECTIONS:
            build_index(lake, index_store, embedder.embed, org, collection, model=embedder.name)
    return DemoEnv(settings, lake, SearchService(lake, index_store), embedder, Analytics(lake))
