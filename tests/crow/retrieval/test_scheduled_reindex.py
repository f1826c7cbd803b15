"""Scheduled, git-sourced reindexes end to end, in process (no Ray): a git repository the test
commits to is an organization's knowledge source, a one-minute cron driven by a test clock
runs the reindex, and the job record names the commit indexed (or why it failed)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from crow.data.ingest import validate_rows
from crow.data.lake import DataLake
from crow.retrieval.embed_text import texts_for
from crow.retrieval.index_control import IndexControl
from crow.retrieval.search import SearchService
from crow.services import ThreadProxy
from crow.settings import AppSettings
from crow.store.chat_store import ChatStore
from indexes.store import IndexStore
from models.testing_embed import HashEmbedder

ORG = "acme-outdoor"
EMB = HashEmbedder()


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 2, 3, 0, 30, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit(repo: Path, message: str, **pages: str) -> str:
    for name, text in pages.items():
        (repo / f"{name}.md").write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "kb-repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    return repo


def settings_for(tmp_path: Path, location: str) -> AppSettings:
    return AppSettings.from_args(
        {
            "var_dir": str(tmp_path / "var"),
            "orgs": {
                ORG: {
                    "reindex_cron": "* * * * *",
                    "knowledge_source": {"kind": "git", "location": location},
                }
            },
        }
    )


def top_hit(settings: AppSettings, query: str) -> str | None:
    search = SearchService(DataLake(settings.data_dir), IndexStore(settings.index_dir))
    hits = search.search(ORG, "org_context", EMB.embed([query]), k=1)
    return hits[0]["id"] if hits else None


async def scheduled_job(
    indexer: IndexControl, store: ChatStore, previous: str | None = None
) -> dict:
    """The job the schedule starts next (after `previous`), once it has finished."""
    deadline = time.monotonic() + 60
    while (indexer.last_runs.get(ORG) or {}).get("job_id") in {None, previous}:
        assert time.monotonic() < deadline, "the schedule never ran"
        await asyncio.sleep(0.01)
    job_id = indexer.last_runs[ORG]["job_id"]
    while (job := store.get_job_run(ORG, job_id))["state"] not in {"succeeded", "failed"}:
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.02)
    while indexer.busy:
        await asyncio.sleep(0.01)
    return job


def test_a_new_commit_becomes_searchable_after_the_scheduled_run(tmp_path, repo):
    first = commit(repo, "kb", returns="# Returns\nReturnpolicy sixty days with a receipt.\n")
    settings = settings_for(tmp_path, repo.as_uri())
    lake = DataLake(settings.data_dir)
    lake.register_org(ORG, "Acme Outdoor")
    store, clock = ChatStore(settings.chat_db_path), Clock()
    indexer = IndexControl(settings, ThreadProxy(store), embed=EMB.embed, clock=clock)
    record = validate_rows(
        "documents",
        [
            {
                "id": "doc-api",
                "title": "Staff parking",
                "context_type": "policy",
                "body": "Parkinglot behind",
                "updated_at": clock(),
            }
        ],
    )[0]

    async def run() -> tuple[dict, dict]:
        loop = asyncio.create_task(indexer.run_schedule(0.01))
        try:
            await asyncio.sleep(0.1)
            assert indexer.last_runs == {}  # the clock has not reached the next minute
            clock.advance(minutes=1)
            one = await scheduled_job(indexer, store)
            vector = EMB.embed(texts_for("org_context", {k: [v] for k, v in record.items()}))
            await indexer.index_documents(ORG, [record], vector)
            assert top_hit(settings, "returnpolicy sixty") == "kb-returns.md"
            assert top_hit(settings, "newsletter signup ten") != "kb-newsletter.md"
            commit(repo, "more", newsletter="# Newsletter\nNewsletter signup gives ten off.\n")
            clock.advance(minutes=1)
            two = await scheduled_job(indexer, store, one["id"])
            return one, two
        finally:
            loop.cancel()

    try:
        one, two = asyncio.run(run())
    finally:
        store.close()
    second = git(repo, "rev-parse", "HEAD")
    assert one["state"] == "succeeded" and f"commit {first}" in one["detail"], one
    assert two["state"] == "succeeded" and f"commit {second}" in two["detail"], two
    assert top_hit(settings, "newsletter signup ten") == "kb-newsletter.md"
    assert top_hit(settings, "returnpolicy sixty") == "kb-returns.md"
    assert top_hit(settings, "parkinglot behind") == "doc-api"  # the API document stayed
    origins = lake.read_table(ORG, "documents").to_pydict()
    assert dict(zip(origins["id"], origins["origin"], strict=True)) == {
        "kb-returns.md": "source:git",
        "kb-newsletter.md": "source:git",
        "doc-api": "api",
    }


def test_a_repository_that_fails_to_clone_leaves_the_serving_index(tmp_path, repo):
    commit(repo, "kb", returns="# Returns\nReturnpolicy sixty days.\n")
    good = settings_for(tmp_path, repo.as_uri())
    DataLake(good.data_dir).register_org(ORG, "Acme Outdoor")
    store, clock = ChatStore(good.chat_db_path), Clock()

    async def run(settings: AppSettings) -> dict:
        indexer = IndexControl(settings, ThreadProxy(store), embed=EMB.embed, clock=clock)
        since = clock()
        clock.advance(minutes=1)
        assert len(await indexer.run_due(clock(), since)) == 1
        return await scheduled_job(indexer, store)

    try:
        assert asyncio.run(run(good))["state"] == "succeeded"
        index = IndexStore(good.index_dir)
        serving = index.current(ORG, "org_context")
        gone = settings_for(tmp_path, (tmp_path / "no-such-repo").as_uri())
        failed = asyncio.run(run(gone))
    finally:
        store.close()
    assert failed["state"] == "failed", failed
    assert "knowledge source" in failed["detail"] and "git clone failed" in failed["detail"]
    assert index.current(ORG, "org_context") == serving
    assert top_hit(good, "returnpolicy sixty") == "kb-returns.md"


def test_a_due_org_whose_reindex_still_runs_is_skipped(tmp_path, repo, caplog):
    commit(repo, "kb", returns="# Returns\nsixty days\n")
    settings = settings_for(tmp_path, repo.as_uri())
    DataLake(settings.data_dir).register_org(ORG, "Acme Outdoor")
    store, clock = ChatStore(settings.chat_db_path), Clock()
    running = store.create_job_run(ORG, "reindex", collections=["org_context"])
    store.update_job_run(ORG, running["id"], state="running")
    indexer = IndexControl(settings, ThreadProxy(store), embed=EMB.embed, clock=clock)
    since = clock()
    clock.advance(minutes=1)
    try:
        with caplog.at_level(logging.INFO, logger="crow.retrieval.index_control"):
            started = asyncio.run(indexer.run_due(clock(), since))
        assert started == [] and indexer.last_runs == {}
        assert f"skipped: job {running['id']} is still running" in caplog.text
        assert store.get_job_run(ORG, running["id"])["state"] == "running"
        schedule = asyncio.run(indexer.schedule(ORG))
        assert schedule["last_run"] is None
        assert (
            schedule["next_run"] == (clock().replace(second=0) + timedelta(minutes=1)).isoformat()
        )
    finally:
        store.close()
