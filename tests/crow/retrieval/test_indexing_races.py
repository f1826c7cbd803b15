"""Writers of one org_context index at once: /qna/index adds, reindexes (in-process and the
Ray job's own code path), a knowledge-source reindex, and a build killed mid-publish.

Real lake, real index store, real chat store, the hash embedder; the Ray job's embedding
pool is replaced by the hash embedder reading the same Parquet files (no Ray needed).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from crow.data import knowledge_source as kb_source
from crow.data.ingest import ingest, validate_rows
from crow.data.lake import DataLake
from crow.retrieval.embed_text import texts_for
from crow.retrieval.index_build import build_index
from crow.retrieval.index_control import IndexControl
from crow.retrieval.search import SearchService
from crow.services import ThreadProxy
from crow.settings import AppSettings
from crow.store.chat_store import ChatStore
from indexes.store import IndexStore
from jobs import reindex
from models.testing_embed import HashEmbedder
from tests.job_fakes import RecordingJob
from tests.repo import ROOT

ORG = "acme-outdoor"
EMB = HashEmbedder()


def make_settings(tmp_path: Path, source: Path | None = None) -> AppSettings:
    args: dict = {"var_dir": str(tmp_path / "var")}
    if source is not None:
        args["orgs"] = {ORG: {"knowledge_source": {"kind": "folder", "location": str(source)}}}
    return AppSettings.from_args(args)


def make_lake(settings: AppSettings, n_docs: int = 5) -> DataLake:
    lake = DataLake(settings.data_dir)
    lake.register_org(ORG, "Acme Outdoor")
    rows = [doc_row(f"doc-seed-{i}", f"seedword{i} catalogue") for i in range(n_docs)]
    lake.write(ORG, "documents", [validate_rows("documents", rows)], mode="upsert")
    build_index(lake, IndexStore(settings.index_dir), EMB.embed, ORG, "org_context", model=EMB.name)
    return lake


def doc_row(doc_id: str, words: str) -> dict:
    return {
        "id": doc_id,
        "title": f"Note {doc_id}",
        "context_type": "policy",
        "body": f"{words} {words}",
        "updated_at": "2026-01-01T00:00:00Z",
    }


def api_record(doc_id: str, words: str) -> tuple[dict, np.ndarray]:
    """What POST /qna/index hands the indexer: a validated record and its vector."""
    record = validate_rows("documents", [doc_row(doc_id, words)])[0]
    return record, EMB.embed(texts_for("org_context", {k: [v] for k, v in record.items()}))


def live_ids(settings: AppSettings) -> set[str]:
    return {str(i) for i in IndexStore(settings.index_dir).load(ORG, "org_context").ids if i}


def lake_docs(settings: AppSettings) -> dict[str, str | None]:
    table = DataLake(settings.data_dir).read_table(ORG, "documents")
    ids = table["id"].to_pylist()
    origins = table["origin"].to_pylist() if "origin" in table.column_names else [None] * len(ids)
    return dict(zip(ids, origins, strict=True))


def top_hit(settings: AppSettings, query: str) -> str | None:
    search = SearchService(DataLake(settings.data_dir), IndexStore(settings.index_dir))
    hits = search.search(ORG, "org_context", EMB.embed([query]), k=1)
    return hits[0]["id"] if hits else None


async def wait_job(store: ChatStore, job_id: str, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while (job := store.get_job_run(ORG, job_id))["state"] not in {"succeeded", "failed"}:
        assert time.monotonic() < deadline, job
        await asyncio.sleep(0.02)
    return job


class FakeRay:
    """jobs.reindex.embed_with_ray without Ray: reads the same Parquet files, hash-embeds.
    `gate`: the first call waits for it (a long embedding that others write during)."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate, self.entered, self.calls = gate, threading.Event(), 0

    def __call__(self, settings, parquet, collection, rows, on_rows):
        self.calls += 1
        table = pq.read_table(parquet)
        if self.gate is not None and self.calls == 1:
            self.entered.set()
            assert self.gate.wait(30)
        ids = [str(i) for i in table["id"].to_pylist()]
        vectors = EMB.embed(texts_for(collection, table.to_pydict()))
        on_rows(len(ids))
        return ids, vectors


def run_job_reindex(settings: AppSettings, monkeypatch, fake: FakeRay) -> dict:
    monkeypatch.setattr(reindex, "embed_with_ray", fake)
    return reindex.reindex_collection(
        settings, ORG, "org_context", full=True, recorder=RecordingJob()
    )


# --- concurrent adds -------------------------------------------------------------------------
@pytest.mark.faults
def test_sixteen_concurrent_adds_are_all_searchable(tmp_path):
    settings = make_settings(tmp_path)
    make_lake(settings)
    indexer = IndexControl(settings, store=None)
    docs = [api_record(f"doc-api-{i}", f"zeta{i} quux{i}") for i in range(16)]

    async def run():
        await asyncio.gather(*(indexer.index_documents(ORG, [r], v) for r, v in docs))

    asyncio.run(run())
    wanted = {r["id"] for r, _ in docs}
    assert wanted <= live_ids(settings), f"lost: {sorted(wanted - live_ids(settings))}"
    assert wanted <= set(lake_docs(settings))
    for i in range(16):
        assert top_hit(settings, f"zeta{i} quux{i}") == f"doc-api-{i}"
    assert {lake_docs(settings)[i] for i in wanted} == {"api"}


# --- an add while a full reindex runs ------------------------------------------------------
@pytest.mark.faults
def test_an_add_during_an_in_process_reindex_survives_it(tmp_path):
    settings = make_settings(tmp_path)
    make_lake(settings)
    gate, entered = threading.Event(), threading.Event()

    def slow_embed(texts):
        if not gate.is_set():  # the reindex's embedding: hold it until the add is done
            entered.set()
            assert gate.wait(30)
        return EMB.embed(texts)

    store = ChatStore(settings.chat_db_path)
    indexer = IndexControl(settings, ThreadProxy(store), embed=slow_embed)
    record, vector = api_record("doc-api-mid", "midreindex walrus")

    async def run():
        job = await indexer.submit(ORG, ["org_context"], True)
        assert await asyncio.to_thread(entered.wait, 30)
        await indexer.index_documents(ORG, [record], vector)  # not held up by the reindex
        assert top_hit(settings, "midreindex walrus") == "doc-api-mid"
        gate.set()
        return await wait_job(store, job["id"])

    try:
        job = asyncio.run(run())
    finally:
        store.close()
    assert job["state"] == "succeeded", job
    assert "doc-api-mid" in live_ids(settings)
    assert top_hit(settings, "midreindex walrus") == "doc-api-mid"
    assert live_ids(settings) == set(lake_docs(settings))


@pytest.mark.faults
def test_an_add_and_an_ingest_during_the_job_reindex_survive_it(tmp_path, monkeypatch):
    """The Ray job's path: rows written while the pool embeds are caught up before publish."""
    settings = make_settings(tmp_path)
    make_lake(settings)
    fake = FakeRay(gate=threading.Event())
    indexer = IndexControl(settings, store=None)
    record, vector = api_record("doc-api-mid", "midreindex walrus")
    result: dict = {}
    job = threading.Thread(
        target=lambda: result.update(run_job_reindex(settings, monkeypatch, fake))
    )
    job.start()
    try:
        assert fake.entered.wait(30)
        asyncio.run(indexer.index_documents(ORG, [record], vector))
        line = json.dumps(doc_row("doc-ingested-mid", "ingested narwhal")).encode()
        ingest(DataLake(settings.data_dir), ORG, "documents", line, "jsonl", mode="upsert")
    finally:
        fake.gate.set()  # type: ignore[union-attr]
        job.join(30)
    assert result["version"] == IndexStore(settings.index_dir).current(ORG, "org_context")
    assert {"doc-api-mid", "doc-ingested-mid"} <= live_ids(settings)
    assert top_hit(settings, "midreindex walrus") == "doc-api-mid"
    assert top_hit(settings, "ingested narwhal") == "doc-ingested-mid"


# --- a knowledge-source reindex keeps documents from elsewhere -----------------------------
def _kb(folder: Path, **pages: str) -> None:
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*.md"):
        old.unlink()
    for name, words in pages.items():
        (folder / f"{name}.md").write_text(f"# {name}\n{words}\n")


def _source_reindex(how: str, settings: AppSettings, monkeypatch) -> dict | None:
    if how == "job":
        run_job_reindex(settings, monkeypatch, FakeRay())
        return None
    store = ChatStore(settings.chat_db_path)
    indexer = IndexControl(settings, ThreadProxy(store), embed=EMB.embed)

    async def run():
        job = await indexer.submit(ORG, ["org_context"], True)
        return await wait_job(store, job["id"])

    try:
        return asyncio.run(run())
    finally:
        store.close()


@pytest.mark.parametrize("how", ["in-process", "job"])
def test_a_source_reindex_replaces_only_the_sources_documents(tmp_path, monkeypatch, how):
    kb = tmp_path / "kb"
    _kb(kb, returns="returnpolicy sixty days", hours="openinghours nine five")
    settings = make_settings(tmp_path, source=kb)
    lake = make_lake(settings, n_docs=2)  # ingested (origin "ingest")
    # a source document stored before documents had an origin, and an API one
    legacy = validate_rows("documents", [doc_row("kb-stale.md", "stalepage")])[0]
    lake.write(ORG, "documents", [[{**legacy, "origin": None}]], mode="upsert")
    record, vector = api_record("doc-api-1", "apiword giraffe")
    asyncio.run(IndexControl(settings, store=None).index_documents(ORG, [record], vector))

    job = _source_reindex(how, settings, monkeypatch)
    if job is not None:
        assert job["state"] == "succeeded", job
        assert "knowledge source folder" in job["detail"] and "2 documents" in job["detail"]
    assert lake_docs(settings) == {
        "doc-seed-0": "ingest",
        "doc-seed-1": "ingest",
        "doc-api-1": "api",
        "kb-returns.md": "source:folder",
        "kb-hours.md": "source:folder",
    }
    assert live_ids(settings) == set(lake_docs(settings))
    assert top_hit(settings, "apiword giraffe") == "doc-api-1"
    assert top_hit(settings, "returnpolicy sixty") == "kb-returns.md"

    _kb(kb, returns="returnpolicy thirty days now", faq="frequentlyasked questions")
    _source_reindex(how, settings, monkeypatch)
    docs = lake_docs(settings)
    assert set(docs) == {"doc-seed-0", "doc-seed-1", "doc-api-1", "kb-returns.md", "kb-faq.md"}
    assert live_ids(settings) == set(docs)
    assert top_hit(settings, "apiword giraffe") == "doc-api-1"
    assert top_hit(settings, "frequentlyasked questions") == "kb-faq.md"


@pytest.mark.parametrize("how", ["in-process", "job"])
def test_a_failed_source_reindex_leaves_data_and_index_as_they_were(tmp_path, monkeypatch, how):
    kb = tmp_path / "kb"
    _kb(kb, returns="returnpolicy sixty days")
    settings = make_settings(tmp_path, source=kb)
    make_lake(settings, n_docs=2)
    record, vector = api_record("doc-api-1", "apiword giraffe")
    asyncio.run(IndexControl(settings, store=None).index_documents(ORG, [record], vector))
    before_docs, before_version = (
        lake_docs(settings),
        IndexStore(settings.index_dir).current(ORG, "org_context"),
    )

    def broken_publish(self, org, collection, version):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(IndexStore, "publish", broken_publish)
    if how == "job":
        with pytest.raises(OSError, match="No space"):
            _source_reindex(how, settings, monkeypatch)
    else:
        job = _source_reindex(how, settings, monkeypatch)
        assert job["state"] == "failed" and "No space left" in job["detail"], job
    monkeypatch.undo()
    assert lake_docs(settings) == before_docs
    assert IndexStore(settings.index_dir).current(ORG, "org_context") == before_version
    assert top_hit(settings, "apiword giraffe") == "doc-api-1"

    _kb(kb)  # now the source cannot be read at all
    kb.rmdir()
    if how == "job":
        with pytest.raises(kb_source.SourceError, match="does not exist"):
            _source_reindex(how, settings, monkeypatch)
    else:
        job = _source_reindex(how, settings, monkeypatch)
        assert job["state"] == "failed" and "does not exist" in job["detail"], job
    assert lake_docs(settings) == before_docs
    assert IndexStore(settings.index_dir).current(ORG, "org_context") == before_version


# --- a build killed mid-publish ------------------------------------------------------------
KILLED_BUILD = """
import os, sys, time
from pathlib import Path
import indexes.store as st
from crow.data.lake import DataLake
from crow.retrieval.index_control import load_source_records
from crow.retrieval.index_build import build_index
from crow.settings import AppSettings
from indexes.store import IndexStore
from models.testing_embed import HashEmbedder

point, marker, settings_json = sys.argv[1], Path(sys.argv[2]), sys.argv[3]

def hook(at):
    if at == point:
        marker.write_text(str(os.getpid()))
        time.sleep(300)  # killed here

st.fault_hook = hook
settings = AppSettings.model_validate_json(settings_json)
records, extra = load_source_records(settings, "acme-outdoor") or (None, {})
emb = HashEmbedder()
build_index(DataLake(settings.data_dir), IndexStore(settings.index_dir), emb.embed,
            "acme-outdoor", "org_context", model=emb.name, source_records=records, extra=extra)
print("published without being killed")
"""


@pytest.mark.faults
@pytest.mark.parametrize(
    ("point", "with_source"),
    [
        ("publish:staged", False),
        ("publish:renamed", False),
        ("build:data-switched", True),
        ("publish:renamed", True),
    ],
)
def test_a_build_killed_mid_publish_leaves_the_old_version_serving(tmp_path, point, with_source):
    kb = tmp_path / "kb"
    _kb(kb, returns="returnpolicy sixty days")
    settings = make_settings(tmp_path, source=kb if with_source else None)
    make_lake(settings, n_docs=3)
    stale = validate_rows("documents", [doc_row("kb-gone.md", "removedpage")])[0]
    DataLake(settings.data_dir).write(
        ORG, "documents", [[{**stale, "origin": "source:folder"}]], mode="upsert"
    )
    store = IndexStore(settings.index_dir)
    build_index(DataLake(settings.data_dir), store, EMB.embed, ORG, "org_context", model=EMB.name)
    serving = store.current(ORG, "org_context")
    assert top_hit(settings, "removedpage") == "kb-gone.md"

    marker = tmp_path / "at-hook"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_BUILD, point, str(marker), settings.model_dump_json()],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, f"the build ended before {point}: {proc.stdout.read()}"
            assert time.monotonic() < deadline, f"the build never reached {point}"
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)  # a real kill, holding the index lock
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()  # type: ignore[union-attr]

    assert store.current(ORG, "org_context") == serving  # the old version still serves
    assert top_hit(settings, "seedword1 catalogue") == "doc-seed-1"
    if with_source:  # killed after the documents switched: the old index's gone page is not
        assert "kb-gone.md" not in lake_docs(settings)
        assert top_hit(settings, "removedpage") != "kb-gone.md"
    # The lock died with the process: an add goes through at once, then the next job succeeds.
    record, vector = api_record("doc-api-after", "afterkill okapi")
    started = time.monotonic()
    asyncio.run(IndexControl(settings, store=None).index_documents(ORG, [record], vector))
    assert time.monotonic() - started < 10
    from crow.retrieval.index_control import load_source_records

    records, _ = load_source_records(settings, ORG) or (None, {})
    meta = build_index(
        DataLake(settings.data_dir),
        store,
        EMB.embed,
        ORG,
        "org_context",
        model=EMB.name,
        source_records=records,
    )
    assert store.current(ORG, "org_context") == meta.version != serving
    docs = lake_docs(settings)
    kb_docs = {"kb-returns.md"} if with_source else {"kb-gone.md"}
    assert (
        live_ids(settings)
        == set(docs)
        == {"doc-seed-0", "doc-seed-1", "doc-seed-2", "doc-api-after", *kb_docs}
    )
    assert top_hit(settings, "afterkill okapi") == "doc-api-after"
    assert not list((store.collection_dir(ORG, "org_context") / ".staging").glob("*"))


@pytest.mark.faults
def test_sixteen_concurrent_qna_index_requests_are_all_searchable(tmp_path):
    """The same through HTTP: 16 clients post /qna/index at once, then each finds its own."""
    from concurrent.futures import ThreadPoolExecutor

    from fastapi.testclient import TestClient

    from crow.api.app import create_app
    from models.testing import ScriptedChatModel
    from tests.conftest import key_headers
    from tests.demo_env import build_demo_env

    demo = build_demo_env(tmp_path / "var", interactions=100)
    store = ChatStore(demo.settings.chat_db_path)
    headers = key_headers(store, "acme-outdoor")
    app = create_app(demo.services(ScriptedChatModel(), store=store, index_control=True))
    words = [f"zebracode{n:02d} quokka{n:02d} lantern{n:02d}" for n in range(16)]
    with TestClient(app) as client, ThreadPoolExecutor(16) as pool:
        posts = list(
            pool.map(
                lambda w: client.post(
                    "/api/v1/qna/index",
                    json={"title": w, "body": f"Policy about {w}."},
                    headers=headers,
                ),
                words,
            )
        )
        assert [r.status_code for r in posts] == [201] * 16
        for post, w in zip(posts, words, strict=True):
            hits = client.get("/api/v1/qna/search", params={"query": w, "topK": 1}, headers=headers)
            assert [h["id"] for h in hits.json()["results"]] == [post.json()["id"]], w
    store.close()
