"""Index control: one document indexed at once, reindex jobs, and their cron schedule.

``Indexer`` runs reindexes in a background thread of this process (tests, a single process);
the Serve graph's ReindexControl deployment subclasses it to submit Ray Jobs instead. Either
way the job-run record in the chat store tracks state and rows done / total.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from crow.datalake import DataLake
from crow.ids import new_id
from crow.indexing import add_to_index, build_index
from crow.settings import AppSettings
from indexes.store import IndexStore

log = logging.getLogger(__name__)
Notify = Callable[[], Awaitable[Any]]


class Indexer:
    def __init__(
        self,
        settings: AppSettings,
        store: Any,
        *,
        embed: Callable[[list[str]], np.ndarray] | None = None,
        notify: Notify | None = None,
    ) -> None:
        self.settings = settings
        self.store = store  # async facade over ChatStore
        self.lake = DataLake(settings.data_dir)
        self.index_store = IndexStore(settings.index_dir)
        self.embed = embed
        self.notify = notify
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def busy(self) -> bool:
        """A reindex of this process is still running."""
        return bool(self._tasks)

    async def index_documents(
        self, org_id: str, records: list[dict[str, Any]], vectors: np.ndarray
    ) -> str:
        """Write the documents and add them to the org_context index; searchable on return."""

        def work() -> str:
            self.lake.write(org_id, "documents", [records], mode="upsert")
            meta = add_to_index(
                self.index_store, org_id, "org_context", [r["id"] for r in records], vectors,
                model=self.settings.embedder.model,
            )  # fmt: skip
            return meta.version

        version = await asyncio.to_thread(work)
        if self.notify:
            await self.notify()
        return version

    async def submit(self, org_id: str, collections: list[str], full: bool) -> dict[str, Any]:
        """The new job; or the running job of the org that covers one of `collections`, with
        ``already_running: True`` (one running reindex per organization and collection)."""
        for _ in range(2):
            job = await self.store.create_job_run(
                org_id, "reindex", job_id=new_id("job"), collections=collections
            )
            if not job.get("already_running"):
                await self._start(org_id, job["id"], collections, full)
                return await self.status(org_id, job["id"])  # type: ignore[return-value]
            # The record may be stale (a job that died): its status refreshes it; then retry.
            current = await self.status(org_id, job["id"]) or job
            if current["state"] in {"pending", "running"}:
                return {**current, "already_running": True}
        return {**job, "already_running": True}

    async def _start(self, org_id: str, job_id: str, collections: list[str], full: bool) -> None:
        task = asyncio.create_task(self._run_here(org_id, job_id, collections, full))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_here(self, org_id: str, job_id: str, collections: list[str], full: bool) -> None:
        if self.embed is None:
            raise RuntimeError("this indexer has no embedder to run reindexes in-process")
        await self.store.update_job_run(org_id, job_id, state="running")
        done = 0
        try:
            for collection in collections:

                def progress(n: int, total: int, c: str = collection) -> None:
                    log.debug("%s/%s: %d/%d", org_id, c, n, total)

                meta = await asyncio.to_thread(
                    build_index, self.lake, self.index_store, self.embed, org_id, collection,
                    model=self.settings.embedder.model, on_progress=progress,
                )  # fmt: skip
                done += meta.count
                await self.store.update_job_run(org_id, job_id, rows_done=done)
                await self.store.record_index_version(
                    org_id, collection, meta.version, kind=meta.kind, row_count=meta.count,
                    model=meta.model,
                )  # fmt: skip
            if self.notify:
                await self.notify()
            await self.store.update_job_run(org_id, job_id, state="succeeded", rows_total=done)
        except Exception as exc:
            log.exception("reindex %s failed", job_id)
            await self.store.update_job_run(org_id, job_id, state="failed", detail=str(exc)[:1000])

    async def status(self, org_id: str, job_id: str) -> dict[str, Any] | None:
        return await self.store.get_job_run(org_id, job_id)

    async def schedule(self, org_id: str) -> dict[str, Any]:
        """The org's reindex cron expression and its next run."""
        org = self.settings.orgs.get(org_id)
        cron = org.reindex_cron if org else None
        next_run = None
        if cron:
            from croniter import croniter

            next_run = croniter(cron, datetime.now(UTC)).get_next(datetime).isoformat()
        return {"organization_id": org_id, "cron": cron, "next_run": next_run}

    def due(self, now: datetime, since: datetime) -> list[str]:
        """Orgs whose cron fired in (since, now]."""
        from croniter import croniter

        fired = []
        for org_id, org in self.settings.orgs.items():
            if org.reindex_cron and croniter(org.reindex_cron, since).get_next(datetime) <= now:
                fired.append(org_id)
        return fired
