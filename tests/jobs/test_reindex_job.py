"""The reindex Ray Job on a real local Ray cluster: Ray Data embedding pool, versions, records."""

from __future__ import annotations

import json

import pytest

from crow.config_source import app_args_env, settings_from_config_arg
from crow.data.lake import DataLake
from crow.settings import AppSettings
from crow.store.chat_store import ChatStore
from indexes.store import IndexStore
from jobs import reindex
from tests.demo_env import seed_demo
from tests.job_fakes import RecordingJob

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
    seed_demo(var, ORG, 200)
    kb = tmp_path / "kb"  # the org's knowledge source: its pages join the seeded documents
    kb.mkdir()
    (kb / "returns.md").write_text("# Returns\nSixty days with a receipt.\n")
    (kb / "hours.md").write_text("# Hours\nOpen nine to five.\n")
    args = {
        "var_dir": str(var),
        "reindex": {"batch_size": 64},
        "orgs": {ORG: {"knowledge_source": {"kind": "folder", "location": str(kb)}}},
    }
    for key, value in app_args_env(args).items():  # how ReindexControl hands settings to the job
        monkeypatch.setenv(key, value)
    settings = settings_from_config_arg("env")
    assert settings.var_dir == var and settings.reindex.batch_size == 64

    argv = [
        "--org",
        ORG,
        "--collection",
        "patterns",
        "--collection",
        "org_context",
        "--config",
        "env",
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
    assert (
        reindex.main(
            [
                *argv[:2],
                "--collection",
                "org_context",
                "--incremental",
                "--config",
                "env",
                "--job-id",
                "job_inc",
            ]
        )
        == 0
    )
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
    args = {"var_dir": "/srv", "embedder": {"model": "m", "batch_size": 8}}
    env = app_args_env(args)
    assert env == {"CROW_APP_ARGS": json.dumps(args)}
    assert json.loads(env["CROW_APP_ARGS"]) == args


def test_a_killed_job_leaves_the_serving_version(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from crow.retrieval.index_build import build_index
    from crow.retrieval.search import SearchService
    from models.testing_embed import HashEmbedder

    var = tmp_path / "var"
    seed_demo(var, ORG, 4000)
    lake, store, hashed = DataLake(var / "data"), IndexStore(var / "indexes"), HashEmbedder()
    serving = build_index(lake, store, hashed.embed, ORG, "interactions", model=hashed.name).version
    env = {**os.environ, "CROW_VAR_DIR": str(var), "RAY_ADDRESS": "local"}
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jobs.reindex",
            "--org",
            ORG,
            "--collection",
            "interactions",
            "--config",
            "none",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
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


# --- the vector dimension: never from a model loaded in the driver ---------------------------
def _hash_pool(dim: int):
    """jobs.reindex.embed_with_ray without Ray: hash-embeds the Parquet rows at `dim`."""
    import pyarrow.parquet as pq

    from crow.retrieval.embed_text import texts_for
    from models.testing_embed import HashEmbedder

    def embed(settings, parquet, collection, rows, on_rows):
        table = pq.read_table(parquet)
        on_rows(table.num_rows)
        texts = texts_for(collection, table.to_pydict())
        return [str(i) for i in table["id"].to_pylist()], HashEmbedder(dim).embed(texts)

    return embed


@pytest.fixture
def no_model_in_driver(monkeypatch):
    import sentence_transformers

    def refuse(*args, **kwargs):
        raise AssertionError("the job loaded the embedding model in its driver")

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", refuse)


def _add_docs(settings: AppSettings, numbers: range) -> None:
    from crow.data.ingest import validate_rows

    rows = [
        {
            "id": f"doc-{i}",
            "title": f"Note {i}",
            "context_type": "policy",
            "body": f"word{i} body",
            "updated_at": "2026-01-01T00:00:00Z",
        }
        for i in numbers
    ]
    DataLake(settings.data_dir).write(
        ORG, "documents", [validate_rows("documents", rows)], mode="upsert"
    )


def _org(tmp_path, embedder: dict | None = None, docs: int = 0) -> AppSettings:
    settings = AppSettings.from_args({"var_dir": str(tmp_path / "var"), "embedder": embedder or {}})
    DataLake(settings.data_dir).register_org(ORG, "Fresh Mart")
    if docs:
        _add_docs(settings, range(docs))
    return settings


def _run(settings, collection="org_context", *, full=True) -> dict:
    return reindex.reindex_collection(settings, ORG, collection, full=full, recorder=RecordingJob())


def test_an_empty_full_reindex_sizes_the_index_without_the_model(tmp_path, no_model_in_driver):
    settings = _org(tmp_path)  # the CPU default: the bundled MiniLM, its files say 384
    _run(settings, "patterns")
    store = IndexStore(settings.index_dir)
    assert (store.meta(ORG, "patterns").dim, store.meta(ORG, "patterns").count) == (384, 0)
    gpu = _org(tmp_path / "gpu", {"model": "BAAI/bge-m3", "device": "cuda", "dim": 1024})
    _run(gpu, "patterns")  # bge-m3 need not be on this machine: embedder.dim says it
    assert IndexStore(gpu.index_dir).meta(ORG, "patterns").dim == 1024
    unknown = _org(tmp_path / "unknown", {"model": "example/not-cached"})
    with pytest.raises(reindex.EmbeddingDimError, match=r"set embedder\.dim"):
        _run(unknown, "patterns")
    assert IndexStore(unknown.index_dir).current(ORG, "patterns") is None


def test_an_empty_full_reindex_keeps_the_dimension_of_its_models_index(
    tmp_path, monkeypatch, no_model_in_driver
):
    settings = _org(tmp_path, {"model": "example/not-cached"}, docs=3)
    monkeypatch.setattr(reindex, "embed_with_ray", _hash_pool(48))
    _run(settings)
    DataLake(settings.data_dir).write(ORG, "documents", [[]], mode="replace")
    _run(settings)  # no rows left: the dimension comes from the current index of this model
    meta = IndexStore(settings.index_dir).meta(ORG, "org_context")
    assert (meta.dim, meta.count) == (48, 0)


def test_a_configured_dim_that_contradicts_the_index_or_vectors_fails(
    tmp_path, monkeypatch, no_model_in_driver
):
    settings = _org(tmp_path, {"model": "example/model"}, docs=3)
    monkeypatch.setattr(reindex, "embed_with_ray", _hash_pool(48))
    _run(settings)
    store = IndexStore(settings.index_dir)
    serving = store.current(ORG, "org_context")
    wrong = settings.model_copy(
        update={"embedder": settings.embedder.model_copy(update={"dim": 64})}
    )
    for full in (True, False):  # before embedding anything
        with pytest.raises(reindex.EmbeddingDimError, match=r"embedder\.dim is 64 .* 48-d"):
            _run(wrong, full=full)
    fresh = _org(tmp_path / "fresh", {"model": "example/model", "dim": 64}, docs=3)
    with pytest.raises(reindex.EmbeddingDimError, match=r"embedder\.dim is 64 .* 48-d vectors"):
        _run(fresh)  # no index yet: the vectors themselves contradict it
    assert IndexStore(fresh.index_dir).current(ORG, "org_context") is None
    assert store.current(ORG, "org_context") == serving


def test_a_new_model_takes_a_full_reindex_which_says_so(tmp_path, monkeypatch):
    old = _org(tmp_path, {"model": "example/small"}, docs=3)
    monkeypatch.setattr(reindex, "embed_with_ray", _hash_pool(48))
    _run(old)
    new = old.model_copy(
        update={"embedder": old.embedder.model_copy(update={"model": "example/large"})}
    )
    monkeypatch.setattr(reindex, "embed_with_ray", _hash_pool(96))
    _add_docs(old, range(9, 10))
    with pytest.raises(
        reindex.EmbeddingDimError, match=r"example/small vectors \(48-d\).*full reindex"
    ):
        _run(new, full=False)  # mixing two models' vectors in one index
    result = _run(new)
    assert "example/small" in result["model_change"] and "example/large" in result["model_change"]
    meta = IndexStore(old.index_dir).meta(ORG, "org_context")
    assert (meta.model, meta.dim, meta.count) == ("example/large", 96, 4)
    assert "example/small" in meta.extra["model_change"]


def test_embedding_actors_take_a_fraction_of_a_gpu(tmp_path, monkeypatch):
    import ray.data

    seen: dict = {}

    class FakeDataset:
        def repartition(self, blocks):
            return self

        def map_batches(self, fn, **kwargs):
            seen.update(kwargs, fn=fn)
            return self

        def iter_batches(self, **kwargs):
            return iter(())

    monkeypatch.setattr(ray.data, "read_parquet", lambda *a, **k: FakeDataset())
    settings = AppSettings.from_args({"reindex": {"num_gpus": 0.5, "pool_size": 3}})
    reindex.embed_with_ray(settings, ["x.parquet"], "products", 10, lambda n: None)
    assert seen["fn"] is reindex.EmbedBatch
    assert seen["num_gpus"] == 0.5 and isinstance(seen["num_gpus"], float)
    assert isinstance(seen["compute"], ray.data.ActorPoolStrategy)


def test_reindex_control_reserves_the_drivers_cpus() -> None:
    """reindex.driver_num_cpus reaches the Jobs API, so on the GPU cluster the driver runs
    on a worker (the head offers Ray no CPU); 0 leaves it on the head (the CPU profile)."""
    import asyncio
    import types

    from deployments.reindex_control import ReindexControlDeployment

    submitted: list[dict] = []

    class Jobs:
        def submit_job(self, **kwargs) -> None:
            submitted.append(kwargs)

    for cpus, expected in ((1.0, 1.0), (0.0, None)):
        args = {"reindex": {"driver_num_cpus": cpus}}
        control = types.SimpleNamespace(
            _jobs=Jobs, _args=args, settings=AppSettings.from_args(args)
        )
        asyncio.run(
            ReindexControlDeployment.func_or_class._submit_job(
                control, ORG, "job_1", ["products"], True
            )
        )
        assert submitted[-1]["entrypoint_num_cpus"] == expected
        assert "--config env" in submitted[-1]["entrypoint"]
        assert submitted[-1]["runtime_env"] == {"env_vars": app_args_env(args)}


@pytest.mark.real_model
def test_a_small_reindex_in_process_publishes_the_index_the_ray_job_does(
    ray_cluster, tmp_path, monkeypatch
):
    """The same data reindexed by the Ray Job and by IndexControl in this process (what the
    ReindexControl replica runs for a small reindex): the same ids in the same order, the same
    vectors (to float noise: the batches differ), the same index kind; both records carry
    rows done of rows total and their seconds per stage."""
    import asyncio

    import numpy as np

    from crow.retrieval.index_control import IndexControl
    from crow.services import ThreadProxy
    from models.embedder import SentenceTransformerEmbedder

    var = tmp_path / "var"
    seed_demo(var, ORG, 200)
    for key, value in app_args_env({"var_dir": str(var), "reindex": {"batch_size": 64}}).items():
        monkeypatch.setenv(key, value)
    settings = settings_from_config_arg("env")
    collections = ["patterns", "org_context"]
    argv = ["--org", ORG, "--config", "env", "--job-id", "job_ray"]
    assert reindex.main([*argv, *(a for c in collections for a in ("--collection", c))]) == 0

    here = settings.model_copy(
        update={"index_root": tmp_path / "here", "chat_db": tmp_path / "here.duckdb"}
    )
    chat = ChatStore(here.chat_db_path)
    control = IndexControl(
        here,
        ThreadProxy(chat),
        embed=SentenceTransformerEmbedder.from_settings(here.embedder).embed,
    )

    async def run_here() -> dict:
        job = await control.submit(ORG, collections, True)
        while control.busy:
            await asyncio.sleep(0.05)
        return await control.status(ORG, job["id"]) or {}

    try:
        local = asyncio.run(run_here())
    finally:
        chat.close()
    ray_store = ChatStore(settings.chat_db_path)
    try:
        by_ray = ray_store.get_job_run(ORG, "job_ray")
    finally:
        ray_store.close()
    stages = {"start_s", "embed_s", "embed_first_s", "index_s", "total_s"}
    for job in (local, by_ray):
        assert job["state"] == "succeeded" and job["rows_done"] == 65, job
        assert stages <= set(job["timings"]), job["timings"]
    assert local["rows_total"] == 65
    for collection in collections:
        a = IndexStore(settings.index_dir).load(ORG, collection)
        b = IndexStore(here.index_dir).load(ORG, collection)
        assert (a.kind, a.dim, a.count) == (b.kind, b.dim, b.count)
        assert list(a.ids) == list(b.ids)
        everything = np.arange(a.size)
        np.testing.assert_allclose(a.vectors(everything), b.vectors(everything), atol=1e-5)
