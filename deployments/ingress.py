"""Ingress deployment: the FastAPI app of crow.api, served by Ray Serve."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from ray import serve
from ray.exceptions import RayActorError
from ray.serve.exceptions import BackPressureError
from ray.serve.handle import DeploymentHandle

from crow.api.app import create_app
from crow.api.errors import ApiError
from crow.data.lake import DataLake
from crow.services import Services
from crow.settings import AppSettings
from deployments.handles import HandleProxy, StreamingProxy
from deployments.llm_vllm import chat_model_for
from deployments.metrics import RayMetrics


@serve.deployment(name="Ingress", max_ongoing_requests=200, ray_actor_options={"num_cpus": 0})
@serve.ingress()
class Ingress:
    def __init__(
        self,
        settings: AppSettings,
        *,
        chat_store: DeploymentHandle[Any],
        embedder: DeploymentHandle[Any],
        retriever: DeploymentHandle[Any],
        analytics: DeploymentHandle[Any],
        reindex: DeploymentHandle[Any],
        orchestrator: DeploymentHandle[Any],
        llm: DeploymentHandle[Any],
    ) -> None:
        app_settings = settings
        self._store = HandleProxy(chat_store)
        self.services = Services(
            settings=app_settings,
            lake=DataLake(app_settings.data_dir),
            store=self._store,
            embedder=HandleProxy(embedder),
            retriever=HandleProxy(retriever),
            analytics=HandleProxy(analytics),
            indexer=HandleProxy(reindex),
            chat=StreamingProxy(orchestrator, streams=["send_events", "regenerate_events"]),
            metrics=RayMetrics(),
        )
        self.llm = chat_model_for(llm, app_settings)

    def __serve_build_asgi_app__(self) -> FastAPI:
        app = create_app(
            self.services,
            chat_model=self.llm,
            extra_errors={
                # A deployment's queue is full (max_queued_requests): say so at once, don't hang.
                BackPressureError: ApiError(
                    503, "overloaded", "the assistant is busy; retry in a few seconds"
                ),
                # A replica died under the request (Serve is starting a new one). A retry with the
                # same message_id is safe: the question is stored and answered once.
                RayActorError: ApiError(
                    503, "unavailable", "a part of the assistant restarted; retry in a few seconds"
                ),
            },
        )
        return app

    async def check_health(self) -> None:
        await self._store.check_health()
