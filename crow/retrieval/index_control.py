"""Index control: one document indexed at once, reindex jobs, and their cron schedule.

``IndexControl`` runs reindexes in a background thread of this process (tests, a single process);
the Serve graph's ReindexControl deployment subclasses it to submit Ray Jobs instead. Either
way the job-run record in the chat store tracks state and rows done / total, and its
``detail`` says what was indexed (for a knowledge source: the commit) or why it failed.

A full org_context reindex of an organization with a configured knowledge source first reads
the source (crow.data.knowledge_source) and replaces the source's documents only (crow.retrieval.index_build). The
schedule: :meth:`IndexControl.run_schedule` submits a full reindex of every organization whose
cron fired since the last tick, by an injectable clock, and skips (logs) an organization
whose reindex is still running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from crow.background import Background
from crow.data import knowledge_source
from crow.data.lake import DataLake
from crow.facades import StoreFacade
from crow.ids import new_id
from crow.retrieval.index_build import (
    DATASET_OF,
    INDEX_COLLECTIONS,
    add_to_index,
    build_index,
    index_params,
)
from crow.retrieval.stages import Stages
from crow.settings import AppSettings
from indexes.store import IndexStore

log = logging.getLogger(__name__)
Notify = Callable[[], Awaitable[Any]]
Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


def load_source_records(
    settings: AppSettings, org_id: str
) -> tuple[list[dict[str, Any]], dict[str, Any]] | None:
    """The org's knowledge-source documents as validated records, and what to record about
    them; None when the org has no source. Raises knowledge_source.SourceError (or IngestRejected)
    with the reason when the source cannot be read."""
    from crow.data.ingest import validate_rows

    org = settings.orgs.get(org_id)
    ks = org.knowledge_source if org else None
    if ks is None:
        return None
    loaded = knowledge_source.load(ks.kind, ks.location, ref=ks.ref)
    records = validate_rows("documents", loaded.documents)
    return records, {
        "source_kind": ks.kind,
        "source_revision": loaded.revision,
        "source_documents": len(records),
        "source_skipped": loaded.skipped[:20],
    }


def describe_source(info: dict[str, Any]) -> str:
    rev = info.get("source_revision")
    what = f"commit {rev}" if rev else "folder"
    skipped = len(info.get("source_skipped") or [])
    return (
        f"org_context: knowledge source {info['source_kind']} {what}, "
        f"{info['source_documents']} documents" + (f", {skipped} files skipped" if skipped else "")
    )


class IndexControl:
    log = log  # where schedule decisions are logged (the Serve deployment: its replica log)

    def __init__(
        self,
        settings: AppSettings,
        store: StoreFacade,
        *,
        embed: Callable[[list[str]], np.ndarray] | None = None,
        notify: Notify | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.lake = DataLake(settings.data_dir)
        self.index_store = IndexStore(settings.index_dir)
        self.embed = embed
        self.notify = notify
        self.clock: Clock = clock or _utc_now
        self.last_runs: dict[str, dict[str, str]] = {}  # org -> {"at", "job_id"} (scheduled)
        self._reindexes = Background()  # in-process reindexes, not cancelled with a request

    @property
    def busy(self) -> bool:
        """A reindex of this process is still running."""
        return bool(self._reindexes)

    async def index_documents(
        self, org_id: str, records: list[dict[str, Any]], vectors: np.ndarray
    ) -> str:
        """Write the documents (origin ``api``) and add them to the org_context index;
        searchable on return.

        The org_context index lock is held from the Parquet upsert to the publish: concurrent
        calls, and a reindex publishing meanwhile, each see the others' documents."""
        records = [{**r, "origin": "api"} for r in records]

        def work() -> str:
            with self.index_store.lock(org_id, "org_context"):
                self.lake.write(org_id, "documents", [records], mode="upsert")
                meta = add_to_index(
                    self.index_store,
                    org_id,
                    "org_context",
                    [r["id"] for r in records],
                    vectors,
                    model=self.settings.embedder.model,
                    params=index_params(self.settings.search),
                )
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
                # The record was just created (job runs are never deleted): status has it.
                return await self.status(org_id, job["id"]) or job
            # The record may be stale (a job that died): its status refreshes it; then retry.
            current = await self.status(org_id, job["id"]) or job
            if current["state"] in {"pending", "running"}:
                return {**current, "already_running": True}
        return {**job, "already_running": True}

    async def _start(self, org_id: str, job_id: str, collections: list[str], full: bool) -> None:
        self._reindexes.start(self._run_here(org_id, job_id, collections, full))

    async def _run_here(self, org_id: str, job_id: str, collections: list[str], full: bool) -> None:
        """The reindex in this process, recorded as a Ray Job records it: state, rows done of
        rows total as it goes, the detail, and seconds per stage (crow.retrieval.stages)."""
        if self.embed is None:
            raise RuntimeError("this indexer has no embedder to run reindexes in-process")
        job = await self.store.get_job_run(org_id, job_id)
        stages = Stages(job["created_at"] if job else None)
        embed = stages.timed_embed(self.embed)
        total = sum(self.lake.count(org_id, DATASET_OF[c]) for c in collections)
        await self.store.update_job_run(org_id, job_id, state="running", rows_total=total)
        loop = asyncio.get_running_loop()

        async def record(rows_done: int) -> None:
            await self.store.update_job_run(org_id, job_id, rows_done=rows_done)

        done, notes, step = 0, [], "starting"
        try:
            for collection in collections:

                def progress(n: int, _: int, base: int = done) -> None:  # from the build thread
                    asyncio.run_coroutine_threadsafe(record(base + n), loop)

                records: list[dict[str, Any]] | None = None
                extra: dict[str, Any] = {}
                with stages.collection():
                    if full and collection == "org_context":
                        step = "org_context: reading the knowledge source"
                        with stages.timed("source_s"):
                            loaded = await asyncio.to_thread(
                                load_source_records, self.settings, org_id
                            )
                        if loaded:
                            records, extra = loaded
                            notes.append(describe_source(extra))
                            await self.store.update_job_run(org_id, job_id, detail=notes[-1])
                    step = f"{collection}: building the index"
                    meta = await asyncio.to_thread(
                        build_index,
                        self.lake,
                        self.index_store,
                        embed,
                        org_id,
                        collection,
                        model=self.settings.embedder.model,
                        params=index_params(self.settings.search),
                        on_progress=progress,
                        source_records=records,
                        extra=extra,
                    )
                done += meta.count
                await self.store.update_job_run(
                    org_id, job_id, rows_done=done, timings=stages.record()
                )
                await self.store.record_index_version(
                    org_id,
                    collection,
                    meta.version,
                    kind=meta.kind,
                    row_count=meta.count,
                    model=meta.model,
                )
            if self.notify:
                await self.notify()
            await self.store.update_job_run(
                org_id,
                job_id,
                state="succeeded",
                rows_done=done,
                rows_total=done,
                detail="; ".join(["done", *notes])[:1000],
                timings=stages.record(),
            )
        except Exception as exc:
            log.exception("reindex %s failed", job_id)
            await self.store.update_job_run(
                org_id,
                job_id,
                state="failed",
                detail=f"{step}: {type(exc).__name__}: {exc}"[:1000],
                timings=stages.record(),
            )

    async def status(self, org_id: str, job_id: str) -> dict[str, Any] | None:
        return await self.store.get_job_run(org_id, job_id)

    async def schedule(self, org_id: str) -> dict[str, Any]:
        """The org's reindex cron expression, its next run and its last scheduled run."""
        org = self.settings.orgs.get(org_id)
        cron = org.reindex_cron if org else None
        next_run = None
        if cron:
            from croniter import croniter

            next_run = croniter(cron, self.clock()).get_next(datetime).isoformat()
        last = self.last_runs.get(org_id) or {}
        return {
            "organization_id": org_id,
            "cron": cron,
            "next_run": next_run,
            "last_run": last.get("at"),
            "last_job_id": last.get("job_id"),
        }

    def due(self, now: datetime, since: datetime) -> list[str]:
        """Orgs whose cron fired in (since, now]."""
        from croniter import croniter

        fired = []
        for org_id, org in self.settings.orgs.items():
            if org.reindex_cron and croniter(org.reindex_cron, since).get_next(datetime) <= now:
                fired.append(org_id)
        return fired

    async def run_due(self, now: datetime, since: datetime) -> list[dict[str, Any]]:
        """Submit a full reindex of every org whose cron fired in (since, now]; an org whose
        reindex is still running is skipped (logged), not queued. Returns the jobs started."""
        started = []
        for org_id in self.due(now, since):
            try:
                job = await self.submit(org_id, list(INDEX_COLLECTIONS), True)
            except Exception:
                self.log.exception("scheduled reindex of %s could not be submitted", org_id)
                continue
            if job.get("already_running"):
                self.log.info(
                    "scheduled reindex of %s skipped: job %s is still %s",
                    org_id,
                    job["id"],
                    job["state"],
                )
                continue
            self.last_runs[org_id] = {"at": now.isoformat(), "job_id": job["id"]}
            self.log.info("scheduled reindex of %s submitted as %s", org_id, job["id"])
            started.append(job)
        return started

    async def run_schedule(self, tick_s: float) -> None:
        """Every `tick_s`, run what fired since the previous tick (by ``self.clock``)."""
        since = self.clock()
        while True:
            await asyncio.sleep(tick_s)
            now = self.clock()
            if now <= since:
                continue
            await self.run_due(now, since)
            since = now
