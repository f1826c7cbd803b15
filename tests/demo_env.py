"""A seeded, indexed demo data set (hash embedder) for tests that need real tool results."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crow.chat.agent.loop import Agent
from crow.chat.service import ChatService, ChatServices
from crow.data.analytics import Analytics
from crow.data.lake import DataLake
from crow.retrieval.index_build import INDEX_COLLECTIONS, build_index
from crow.retrieval.index_control import IndexControl
from crow.retrieval.search import SearchService
from crow.services import Services, ThreadProxy
from crow.settings import AppSettings
from crow.store.chat_store import ChatStore
from indexes.store import IndexStore
from jobs.seed_demo import main as seed
from models.chat import ChatModel
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
        return {
            "embedder": ThreadProxy(self.embedder),
            "retriever": ThreadProxy(self.search),
            "analytics": ThreadProxy(self.analytics),
        }

    def services(
        self, store: ChatStore, model: ChatModel, *, indexer: bool = False, **extra: Any
    ) -> Services:
        """The app's services over this data: a real store and tools, the given model."""
        proxies = self.proxies()
        names = {o["id"]: o["name"] for o in self.lake.list_orgs()}
        chat = ChatService(
            ChatServices(store=ThreadProxy(store), org_names=names, **proxies), Agent(model)
        )
        if indexer:

            async def notify() -> None:
                await proxies["retriever"].refresh()

            extra["indexer"] = IndexControl(
                self.settings, ThreadProxy(store), embed=self.embedder.embed, notify=notify
            )
        return Services(
            settings=self.settings,
            lake=self.lake,
            store=ThreadProxy(store),
            chat=chat,
            **proxies,
            **extra,
        )


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
