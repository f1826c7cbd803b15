"""Orchestrator deployment: the agent loop, calling LLM, Embedder, Retriever and Analytics."""

from __future__ import annotations

from typing import Any

from ray import serve
from ray.serve.handle import DeploymentHandle

from crow.chat.service import ChatService
from crow.data.lake import DataLake
from crow.services import Services
from crow.settings import AppSettings
from deployments.handles import HandleProxy
from deployments.llm_vllm import chat_model_for
from deployments.metrics import RayMetrics


@serve.deployment(name="Orchestrator", max_ongoing_requests=64, ray_actor_options={"num_cpus": 0})
class OrchestratorDeployment(ChatService):
    def __init__(
        self,
        settings: AppSettings,
        *,
        chat_store: DeploymentHandle[Any],
        llm: DeploymentHandle[Any],
        embedder: DeploymentHandle[Any],
        retriever: DeploymentHandle[Any],
        analytics: DeploymentHandle[Any],
    ) -> None:
        services = Services(
            settings=settings,
            lake=DataLake(settings.data_dir),
            store=HandleProxy(chat_store),
            embedder=HandleProxy(embedder),
            retriever=HandleProxy(retriever),
            analytics=HandleProxy(analytics),
        )
        super().__init__(services, chat_model_for(llm, settings), metrics=RayMetrics())

    def check_health(self) -> None:
        return None
