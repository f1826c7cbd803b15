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
    args = {"var_dir": str(var), "reindex": {"batch_size": 64}}
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
    assert store.meta(ORG, "patterns").count == 40 and store.meta(ORG, "org_context").count == 25
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
    assert "doc-new" in live and "doc-001" not in live and index.count == 25
    assert store.current(ORG, "org_context") != first

    chat = ChatStore(settings.chat_db_path)
    try:
        full, inc = chat.get_job_run(ORG, "job_full"), chat.get_job_run(ORG, "job_inc")
        assert full["state"] == inc["state"] == "succeeded"
        assert full["rows_done"] == 65 and inc["rows_done"] == 1
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
