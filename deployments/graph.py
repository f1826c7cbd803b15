"""The application graph: ``build_app`` is the import_path of serve_config.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.serve import Application

from crow.settings import AppSettings
from deployments.analytics import AnalyticsDeployment
from deployments.chat_store import ChatStoreDeployment
from deployments.embedder import EmbedderDeployment
from deployments.handles import as_deployment
from deployments.ingress import Ingress
from deployments.llm_vllm import llm_deployment
from deployments.orchestrator import OrchestratorDeployment
from deployments.reindex_control import ReindexControlDeployment
from deployments.retriever import RetrieverDeployment

_PATH_FIELDS = ("var_dir", "data_root", "index_root", "chat_db", "model_cache")


def resolve_settings(args: dict[str, Any]) -> AppSettings:
    """The app's settings, parsed once for every deployment (a typo fails here), with paths
    made absolute for every replica. Replicas receive this model, never the args."""
    settings = AppSettings.from_args(args)
    paths = {
        name: Path(value).resolve()
        for name in _PATH_FIELDS
        if (value := getattr(settings, name)) is not None
    }
    return settings.model_copy(update=paths)


def build_app(args: dict[str, Any]) -> Application:
    settings = resolve_settings(args)
    chat_store = as_deployment(ChatStoreDeployment).bind(settings)
    embedder = as_deployment(EmbedderDeployment).bind(settings)
    retriever = as_deployment(RetrieverDeployment).bind(settings)
    analytics = as_deployment(AnalyticsDeployment).bind(settings)
    llm = llm_deployment(settings)
    orchestrator = as_deployment(OrchestratorDeployment).bind(
        settings,
        chat_store=chat_store,
        llm=llm,
        embedder=embedder,
        retriever=retriever,
        analytics=analytics,
    )
    return as_deployment(Ingress).bind(
        settings,
        chat_store=chat_store,
        embedder=embedder,
        retriever=retriever,
        analytics=analytics,
        reindex=as_deployment(ReindexControlDeployment).bind(
            settings, chat_store, retriever, embedder
        ),
        orchestrator=orchestrator,
        llm=llm,
    )
