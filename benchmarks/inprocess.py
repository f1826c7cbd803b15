"""The app's chat path in this one process: real data, indexes, embedder and chat store.

What the Orchestrator deployment wires from Serve handles, wired here from in-process
objects behind ``ThreadProxy`` (the facade the tests use), with any model; ``wrap`` lets a
benchmark put its timing proxies around each service.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crow.chat.agent.loop import Agent, AgentConfig
from crow.chat.agent.tools import TOOLS, Tool
from crow.chat.service import ChatService, ChatServices
from crow.data.analytics import Analytics
from crow.data.lake import DataLake
from crow.retrieval.search import SearchService
from crow.services import ThreadProxy
from crow.settings import AppSettings, serve_config_args
from crow.store.chat_store import ChatStore
from indexes.store import IndexStore


def bench_settings(config: Path, var: Path, chat_db: Path) -> AppSettings:
    """serve_config.yaml's app settings over the data and indexes under ``var``, with a
    chat database of the benchmark's own (never the running app's)."""
    args = serve_config_args(config) if config.is_file() else {}
    return AppSettings.from_args({**args, "var_dir": str(var), "chat_db": str(chat_db)})


def load_embedder(settings: AppSettings) -> Any:
    from models.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder.from_settings(settings.embedder)


def ensure_indexes(
    settings: AppSettings, org_id: str, embedder: Any, *, progress: bool
) -> list[str]:
    """Build the org's missing indexes in this process (a fresh clone has data, no indexes)."""
    from tqdm import tqdm

    from crow.retrieval.index_build import INDEX_COLLECTIONS, build_index

    lake, store = DataLake(settings.data_dir), IndexStore(settings.index_dir)
    built = []
    for collection in INDEX_COLLECTIONS:
        if store.current(org_id, collection) is not None:
            continue
        with tqdm(desc=f"index {org_id}/{collection}", unit="rows", disable=not progress) as bar:

            def step(done: int, total: int, bar: Any = bar) -> None:
                bar.total = total
                bar.update(done - bar.n)

            build_index(
                lake,
                store,
                embedder.embed,
                org_id,
                collection,
                model=settings.embedder.model,
                on_progress=step,
            )
        built.append(collection)
    return built


@dataclass
class InProcessApp:
    """The components behind one in-process chat path; ``close`` releases the chat DB."""

    settings: AppSettings
    lake: DataLake
    store: ChatStore
    embedder: Any
    search: SearchService
    analytics: Analytics

    @classmethod
    def open(cls, settings: AppSettings, embedder: Any, *, fresh_db: bool = True) -> InProcessApp:
        if fresh_db:
            for suffix in ("", ".wal"):
                Path(f"{settings.chat_db_path}{suffix}").unlink(missing_ok=True)
        lake = DataLake(settings.data_dir)
        search = SearchService(lake, IndexStore(settings.index_dir))
        return cls(
            settings, lake, ChatStore(settings.chat_db_path), embedder, search, Analytics(lake)
        )

    def preload(self, org_id: str) -> None:
        """Load the org's indexes now, as a running app has them loaded."""
        from crow.retrieval.index_build import INDEX_COLLECTIONS

        for collection in INDEX_COLLECTIONS:
            self.search.index(org_id, collection)

    def chat(
        self,
        model: Any,
        *,
        wrap: Callable[[str, Any], Any] = lambda name, proxy: proxy,
        tools: Sequence[Tool] = TOOLS,
    ) -> ChatService:
        """A ChatService over these components and ``model``; ``wrap(name, facade)`` may put
        a proxy around each of store, embedder, retriever and analytics."""
        services = ChatServices(
            store=wrap("store", ThreadProxy(self.store)),
            embedder=wrap("embedding", ThreadProxy(self.embedder)),
            retriever=wrap("retrieval", ThreadProxy(self.search)),
            analytics=wrap("tools", ThreadProxy(self.analytics)),
            org_names={o["id"]: o["name"] for o in self.lake.list_orgs()},
        )
        return ChatService(
            services,
            Agent(model, AgentConfig.from_settings(self.settings), tools),
            history_messages=self.settings.limits.history_messages,
        )

    def close(self) -> None:
        self.store.close()
