"""The reindex Ray Job on a real local Ray cluster: Ray Data embedding pool, versions, records."""

from __future__ import annotations

import json

import pytest

from crow.datalake import DataLake
from crow.settings import AppSettings
from crow.store.chat_store import ChatStore
from deployments.reindex_control import env_for_job
from indexes.store import IndexStore
from jobs import reindex
from jobs.seed_demo import main as seed

pytestmark = pytest.mark.serve
ORG = "fresh-mart"


@pytest.fixture(scope="module")
def ray_cluster():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_full_then_incremental_reindex(ray_cluster, tmp_path, monkeypatch):
    var = tmp_path / "var"
    seed(
        [
            "--data-root",
            str(var / "data"),
            "--end",
            "2026-11-29",
            "--org",
            ORG,
            "--interactions",
            "200",
        ]
    )
    kb = tmp_path / "kb"  # the org's knowledge source: its pages join the seeded documents
    kb.mkdir()
    (kb / "returns.md").write_text("# Returns\nSixty days with a receipt.\n")
    (kb / "hours.md").write_text("# Hours\nOpen nine to five.\n")
    args = {"var_dir": str(var), "reindex": {"batch_size": 64},
            "orgs": {ORG: {"knowledge_source": {"kind": "folder", "location": str(kb)}}}}  # fmt: skip
    for key, value in env_for_job(args).items():  # how ReindexControl hands settings to the job
        monkeypatch.setenv(key, value)
    settings = AppSettings()
    assert settings.var_dir == var and settings.reindex.batch_size == 64

    argv = [
        "--org",
        ORG,
        "--collection",
        "patterns",
        "--collection",
        "org_context",
        "--config",
        "none",
    ]
    assert reindex.main([*argv, "--job-id", "job_full"]) == 0
    store = IndexStore(settings.index_dir)
    first = store.current(ORG, "org_context")
    assert store.meta(ORG, "patterns").count == 40 and store.meta(ORG, "org_context").count == 27
    origins = DataLake(settings.data_dir).read_table(ORG, "documents")["origin"].to_pylist()
    assert origins.count("source:folder") == 2 and origins.count("ingest") == 25
    assert store.meta(ORG, "org_context").dim == 384  # the real bundled MiniLM

    # A new document and a deleted one: incremental embeds one row and drops one.
    lake = DataLake(settings.data_dir)
    docs = lake.read_table(ORG, "documents").to_pylist()
    kept = [d for d in docs if d["id"] != "doc-001"] + [
        {**docs[0], "id": "doc-new", "title": "Night shift"}
    ]
    lake.write(ORG, "documents", [kept], mode="replace")
    assert reindex.main([*argv[:2], "--collection", "org_context", "--incremental", "--config", "none",
                         "--job-id", "job_inc"]) == 0  # fmt: skip
    index = store.load(ORG, "org_context")
    live = {i for i in index.ids if i}
    assert "doc-new" in live and "doc-001" not in live and index.count == 27
    assert {"kb-returns.md", "kb-hours.md"} <= live
    assert store.current(ORG, "org_context") != first

    chat = ChatStore(settings.chat_db_path)
    try:
        full, inc = chat.get_job_run(ORG, "job_full"), chat.get_job_run(ORG, "job_inc")
        assert full["state"] == inc["state"] == "succeeded"
        assert full["rows_done"] == 67 and inc["rows_done"] == 1
        assert "knowledge source folder" in full["detail"] and "2 documents" in full["detail"]
        assert {v["collection"] for v in chat.list_index_versions(ORG)} == {
            "patterns",
            "org_context",
        }
    finally:
        chat.close()


def test_job_env_round_trips_nested_settings():
    env = env_for_job({"var_dir": "/srv", "embedder": {"model": "m", "batch_size": 8}})
    assert env == {
        "CROW_VAR_DIR": "/srv",
        "CROW_EMBEDDER": json.dumps({"model": "m", "batch_size": 8}),
    }


def test_a_killed_job_leaves_the_serving_version(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from crow.indexing import build_index
    from crow.search import SearchService
    from models.testing_embed import HashEmbedder

    var = tmp_path / "var"
    seed(
        [
            "--data-root",
            str(var / "data"),
            "--end",
            "2026-11-29",
            "--org",
            ORG,
            "--interactions",
            "4000",
        ]
    )
    lake, store, hashed = DataLake(var / "data"), IndexStore(var / "indexes"), HashEmbedder()
    serving = build_index(lake, store, hashed.embed, ORG, "interactions", model=hashed.name).version
    env = {**os.environ, "CROW_VAR_DIR": str(var), "RAY_ADDRESS": "local"}
    job = subprocess.Popen(
        [sys.executable, "-m", "jobs.reindex", "--org", ORG, "--collection", "interactions", "--config", "none"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        for line in job.stdout:  # wait until the embedding pool is at work, then kill everything
            if "EmbedBatch" in line or time.monotonic() > deadline:
                break
        assert job.poll() is None, "the job ended before it could be killed"
        os.killpg(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
    assert store.current(ORG, "interactions") == serving
    hits = SearchService(lake, store).search(
        ORG, "interactions", hashed.embed(["queue at checkout"]), k=5
    )
    assert len(hits) == 5
