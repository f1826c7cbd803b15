"""ReindexControl deployment: runs small reindexes itself, submits larger ones as Ray Jobs,
tracks them, runs the cron schedule."""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import numpy as np
from ray import serve
from ray.job_submission import JobStatus, JobSubmissionClient
from ray.serve.handle import DeploymentHandle

from crow.config_source import app_args_env
from crow.retrieval.index_build import DATASET_OF, INDEX_COLLECTIONS
from crow.retrieval.index_control import IndexControl
from crow.settings import AppSettings
from crow.store.jobs import JobState
from deployments.handles import HandleProxy

log = logging.getLogger("ray.serve")  # shown in the replica logs and the console
SCHEDULE_TICK_S = 30.0
_RAY_FINAL: dict[JobStatus, JobState] = {JobStatus.FAILED: "failed", JobStatus.STOPPED: "stopped"}


@serve.deployment(name="ReindexControl", num_replicas=1, ray_actor_options={"num_cpus": 0})
class ReindexControlDeployment(IndexControl):
    log = log  # schedule decisions in the replica log

    async def __init__(  # type: ignore[misc]  # Serve awaits an async __init__
        self,
        settings: AppSettings,
        chat_store: DeploymentHandle[Any],
        retriever: DeploymentHandle[Any],
        embedder: DeploymentHandle[Any],
    ) -> None:
        async def notify() -> None:
            await retriever.refresh.remote()

        timeout_s = settings.timeouts.embed_s * 4  # one reindex batch, queued behind requests
        loop = asyncio.get_running_loop()

        async def embed_batch(texts: list[str]) -> np.ndarray:
            vectors: np.ndarray = await asyncio.wait_for(
                embedder.embed_rows.remote(texts), timeout_s
            )
            return vectors

        def embed(texts: list[str]) -> np.ndarray:
            """From the build thread: one batch through the Embedder deployment, called on
            the replica's event loop (where its handles' router runs)."""
            return asyncio.run_coroutine_threadsafe(embed_batch(texts), loop).result()

        super().__init__(settings, HandleProxy(chat_store), embed=embed, notify=notify)
        await asyncio.to_thread(self.lake.recover)  # a writer killed before this start left files
        self._args = settings.model_dump(mode="json")  # what the jobs it submits read
        self._client: JobSubmissionClient | None = None
        self._here: set[str] = set()  # jobs this replica runs itself: no Ray Job to ask about
        self._scheduler = asyncio.create_task(self._schedule_loop())
        if self.settings.reindex.index_missing_on_start:
            self._first = asyncio.create_task(self._index_missing())

    def _jobs(self) -> JobSubmissionClient:
        if self._client is None:
            self._client = JobSubmissionClient("auto")
        return self._client

    async def _start(self, org_id: str, job_id: str, collections: list[str], full: bool) -> None:
        """A small full reindex in this replica (IndexControl: the same build and publish as
        the job's, embedding through the Embedder deployment), anything else a Ray Job."""
        if full and await self._small(org_id, collections):
            log.info("reindex %s of %s %s: in this replica", job_id, org_id, collections)
            self._here.add(job_id)
            await super()._start(org_id, job_id, collections, full)
        else:
            await self._submit_job(org_id, job_id, collections, full)

    async def _small(self, org_id: str, collections: list[str]) -> bool:
        limit = self.settings.reindex.in_process_max_rows

        def rows() -> int:
            return sum(self.lake.count(org_id, DATASET_OF[c]) for c in collections)

        return limit > 0 and await asyncio.to_thread(rows) <= limit

    async def _submit_job(
        self, org_id: str, job_id: str, collections: list[str], full: bool
    ) -> None:
        command = [
            sys.executable,
            "-m",
            "jobs.reindex",
            "--org",
            org_id,
            "--job-id",
            job_id,
            "--config",
            "env",
        ]
        for collection in collections:
            command += ["--collection", collection]
        if not full:
            command.append("--incremental")
        await asyncio.to_thread(
            self._jobs().submit_job,
            entrypoint=" ".join(command),
            submission_id=job_id,
            runtime_env={"env_vars": app_args_env(self._args)},
            entrypoint_num_cpus=self.settings.reindex.driver_num_cpus or None,
        )

    async def status(self, org_id: str, job_id: str) -> dict[str, Any] | None:
        record = await self.store.get_job_run(org_id, job_id)
        if record is None or job_id in self._here:
            return record
        try:
            ray_status = await asyncio.to_thread(self._jobs().get_job_status, job_id)
        except Exception:  # not a Ray job (or the dashboard is away): the record is the truth
            return record
        final = _RAY_FINAL.get(ray_status)
        if final and record["state"] in {"pending", "running"}:
            # The job died without saying so (killed, OOM): the old index version still serves.
            await self.store.update_job_run(
                org_id, job_id, state=final, detail=f"Ray job {ray_status}"
            )
            record = await self.store.get_job_run(org_id, job_id)
            if record is None:  # job runs are never deleted: as when there is no record
                return None
        return {**record, "ray_status": str(ray_status)}

    async def _index_missing(self) -> None:
        """First start: one job per org that has data but no index yet, one at a time."""
        for org in self.lake.list_orgs():
            org_id = org["id"]
            missing = [c for c in INDEX_COLLECTIONS if self.index_store.current(org_id, c) is None]
            if not missing:
                continue
            try:
                job = await self.submit(org_id, missing, True)
            except Exception:
                log.exception("could not submit the first reindex of %s", org_id)
                continue
            log.info("%s has no %s index yet: reindex job %s submitted", org_id, missing, job["id"])
            while (job := await self.status(org_id, job["id"]) or job)["state"] in {
                "pending",
                "running",
            }:
                log.info(
                    "%s reindex %s: %s rows %s/%s (%s)",
                    org_id,
                    job["id"],
                    job["state"],
                    job["rows_done"],
                    job["rows_total"],
                    job["detail"],
                )
                await asyncio.sleep(5)
            log.info("%s reindex %s %s", org_id, job["id"], job["state"])

    async def _schedule_loop(self) -> None:
        """IndexControl.run_schedule: a due org whose reindex still runs is skipped and logged."""
        await self.run_schedule(SCHEDULE_TICK_S)

    def check_health(self) -> None:
        if self._scheduler.done():
            raise RuntimeError("the reindex scheduler stopped")
