"""The composition root: the one place the application's parts are made and put together.

Every process builds Ask CROW from here. The Serve graph (deployments/) makes each component
with these constructors in its own replica and joins them with DeploymentHandle facades; every
other process (``jobs.eval``, the benchmarks, the tests) opens a :class:`LocalApp`, the same
components in this process, joined with :class:`~crow.services.ThreadProxy` facades. Either
way the request path sees :class:`~crow.services.Services`, and the chat service configures
its agent from the settings.

A chat message, by name: ``crow.api.routes_chat`` -> ``Services.chat`` (a
:class:`~crow.facades.ChatFacade`: :class:`~crow.chat.service.ChatService`) -> its
:class:`~crow.chat.agent.loop.Agent` over a :class:`~models.chat.ChatModel` and a
:class:`~crow.chat.agent.context.ToolContext` (``Services.tool_context``) -> the tools of
``crow.chat.agent.tools`` -> the footnoted answer (``crow.chat.agent.sources``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from crow.chat.agent.config import AgentConfig
from crow.chat.agent.context import ToolContext
from crow.chat.agent.tool import Tool
from crow.chat.agent.tools import TOOLS
from crow.chat.service import ChatService
from crow.data.analytics import Analytics
from crow.data.lake import DataLake
from crow.metrics import Metrics
from crow.retrieval.index_build import INDEX_COLLECTIONS, build_index, index_params
from crow.retrieval.index_control import IndexControl
from crow.retrieval.search import SearchService
from crow.services import Services, ThreadProxy
from crow.settings import AppSettings, read_secret
from crow.store.chat_store import ChatStore
from indexes.store import IndexStore
from models.chat import ChatModel
from models.embedder import Embedder

Wrap = Callable[[str, Any], Any]
"""``wrap(part, facade)``: a benchmark's timing proxy around one facade (identity by default);
parts are "store", "embedding", "retrieval" and "tools"."""
Progress = Callable[[str, int, int], None]
"""``progress(collection, rows_done, rows_total)`` while a missing index is built."""


def _unwrapped(part: str, facade: Any) -> Any:
    return facade


# The components, each made one way from the settings (the deployments use these too).


def open_search(settings: AppSettings) -> SearchService:
    """The retriever: every (org, collection) index under ``index_dir``, searched with the
    configured exact / IVF parameters."""
    settings.index_dir.mkdir(parents=True, exist_ok=True)
    return SearchService(
        DataLake(settings.data_dir),
        IndexStore(settings.index_dir),
        params=index_params(settings.search),
    )


def open_analytics(settings: AppSettings) -> Analytics:
    return Analytics(DataLake(settings.data_dir))


def load_embedder(settings: AppSettings) -> Embedder:
    """The configured sentence-transformers model (offline: a bundled or cached copy)."""
    from models.embedder import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder.from_settings(settings.embedder)


def chat_model(settings: AppSettings) -> ChatModel:
    """The chat model backend ``llm.backend`` names, chosen here once, loaded."""
    llm = settings.llm
    if llm.backend == "local":
        from models.local import LocalChatModel, LocalModelConfig

        model = LocalChatModel(
            LocalModelConfig(
                cache_dir=settings.model_cache_dir,
                model=llm.model,
                threads=llm.threads,
                batch_threads=llm.batch_threads,
                slots=llm.slots,
                max_prompt_tokens=llm.max_prompt_tokens,
                max_tokens=llm.max_tokens,
                batch_tokens=llm.batch_tokens,
                max_waiting=llm.max_waiting,
            )
        )
        model.load()
        return model
    if llm.backend == "openai":
        from models.openai_backend import OpenAIChatModel

        if not llm.base_url:
            raise ValueError("llm.backend 'openai' needs llm.base_url")
        api_key = read_secret(llm.api_key_env, llm.api_key_file) or ""
        return OpenAIChatModel(base_url=llm.base_url, api_key=api_key, model=llm.model)
    if llm.backend == "custom":
        if not llm.factory or ":" not in llm.factory:
            raise ValueError("llm.backend 'custom' needs llm.factory = 'module:callable'")
        module, name = llm.factory.split(":", 1)
        custom: ChatModel = getattr(importlib.import_module(module), name)()  # the config's word
        return custom
    raise ValueError(
        "llm.backend 'vllm' is served by Ray Serve LLM; see cluster/serve_config.gpu.yaml"
    )


# The application in one process.


@dataclass
class LocalApp:
    """The app's components in this process, over the settings' data, indexes and chat DB.

    ``store`` is None for a process that needs no chat DB (the evaluation); a test may hand
    :meth:`services` a store of its own.
    """

    settings: AppSettings
    embedder: Embedder
    search: SearchService
    analytics: Analytics
    store: ChatStore | None = None
    _proxies: dict[str, ThreadProxy] = field(default_factory=dict, repr=False)

    @property
    def lake(self) -> DataLake:
        return self.search.lake

    def org_name(self, org_id: str) -> str:
        return next((o["name"] for o in self.lake.list_orgs() if o["id"] == org_id), org_id)

    def _proxy(self, part: str, target: object) -> ThreadProxy:
        if part not in self._proxies:
            self._proxies[part] = ThreadProxy(target)
        return self._proxies[part]

    def services(
        self,
        model: ChatModel | None = None,
        *,
        store: ChatStore | None = None,
        index_control: bool = False,
        wrap: Wrap = _unwrapped,
        tools: Sequence[Tool] = TOOLS,
        config: AgentConfig | None = None,
        metrics: Metrics | None = None,
    ) -> Services:
        """The request path's services over these components: with ``model``, the chat
        service too; with ``index_control``, reindexes and /qna/index in this process."""
        services = self._facades(store, wrap)
        if index_control:

            async def notify() -> None:
                await self._proxy("retriever", self.search).refresh()

            control = IndexControl(
                self.settings, services.store, embed=self.embedder.embed, notify=notify
            )
            services = replace(services, indexer=control)
        if model is not None:
            chat = ChatService(services, model, tools=tools, config=config, metrics=metrics)
            services = replace(services, chat=chat)
        return services

    def chat(
        self,
        model: ChatModel,
        *,
        store: ChatStore | None = None,
        wrap: Wrap = _unwrapped,
        tools: Sequence[Tool] = TOOLS,
        config: AgentConfig | None = None,
    ) -> ChatService:
        """The chat service alone (what a benchmark of the chat path calls)."""
        return ChatService(self._facades(store, wrap), model, tools=tools, config=config)

    def _facades(self, store: ChatStore | None, wrap: Wrap) -> Services:
        chat_store = store or self.store
        if chat_store is None:
            raise ValueError("this LocalApp has no chat store: pass one")
        return Services(
            settings=self.settings,
            lake=self.lake,
            store=wrap("store", ThreadProxy(chat_store)),
            embedder=wrap("embedding", self._proxy("embedder", self.embedder)),
            retriever=wrap("retrieval", self._proxy("retriever", self.search)),
            analytics=wrap("tools", self._proxy("analytics", self.analytics)),
        )

    def tool_context(self, org_id: str) -> ToolContext:
        """A fresh per-request tool context over these components (no chat store needed)."""
        return ToolContext(
            org_id,
            self._proxy("embedder", self.embedder),
            self._proxy("retriever", self.search),
            self._proxy("analytics", self.analytics),
        )

    def build_missing_indexes(self, org_id: str, *, progress: Progress | None = None) -> list[str]:
        """Build the org's indexes that have no current version, in this process (a fresh
        clone has data and no indexes); the collections built."""
        built = []
        for collection in INDEX_COLLECTIONS:
            if self.search.store.current(org_id, collection) is not None:
                continue

            def step(done: int, total: int, collection: str = collection) -> None:
                if progress is not None:
                    progress(collection, done, total)

            build_index(
                self.lake,
                self.search.store,
                self.embedder.embed,
                org_id,
                collection,
                model=self.embedder.name,
                on_progress=step,
            )
            built.append(collection)
        return built

    def preload(self, org_id: str) -> None:
        """Load the org's indexes now, as a running app has them loaded."""
        for collection in INDEX_COLLECTIONS:
            self.search.index(org_id, collection)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def open_local_app(
    settings: AppSettings,
    embedder: Embedder | None = None,
    *,
    chat_store: bool = False,
    fresh_chat_db: bool = False,
) -> LocalApp:
    """The app in this process: ``embedder`` (else the configured model, loaded), the
    retriever and analytics over the settings' paths, and with ``chat_store`` its chat DB
    (``fresh_chat_db``: emptied first)."""
    store = None
    if chat_store:
        if fresh_chat_db:
            for suffix in ("", ".wal"):
                Path(f"{settings.chat_db_path}{suffix}").unlink(missing_ok=True)
        store = ChatStore(settings.chat_db_path)
    return LocalApp(
        settings,
        embedder or load_embedder(settings),
        open_search(settings),
        open_analytics(settings),
        store,
    )
