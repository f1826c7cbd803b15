"""Search, summary and knowledge-base routes over real FAISS indexes (hash embedder)."""

from __future__ import annotations

import asyncio
import time

import pytest
from fastapi.testclient import TestClient

from crow.api.app import create_app
from crow.retrieval.index_build import build_index
from crow.store.chat_store import ChatStore
from models.testing import ScriptedChatModel
from tests.conftest import assert_error, key_headers
from tests.demo_env import build_demo_env

A, B = "acme-outdoor", "fresh-mart"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    demo = build_demo_env(tmp_path_factory.mktemp("var"))
    store = ChatStore(demo.settings.chat_db_path)
    yield demo.settings, demo.lake, store, demo.search, demo.embedder, demo
    store.close()


@pytest.fixture(scope="module")
def key_a(env) -> dict[str, str]:
    return key_headers(env[2], A)


@pytest.fixture(scope="module")
def api(env):
    *_, store, _, _, demo = env
    with TestClient(
        create_app(demo.services(ScriptedChatModel(), store=store, index_control=True)),
        raise_server_exceptions=False,
    ) as client:
        yield client


def ids_of(response) -> list[str]:
    assert response.status_code == 200, response.text
    return [r["id"] for r in response.json()["results"]]


def test_product_search_carries_interaction_counts_and_sorts_by_popularity(api, key_a):
    r = api.get("/api/v1/products/search", params={"query": "dome tent", "limit": 5}, headers=key_a)
    hits = r.json()["results"]
    assert len(hits) == 5 and all(
        "Tent" in h["title"] or "tent" in h["description"] for h in hits[:2]
    )
    assert all(set(h["interactions"]) == {"total", "web", "cctv", "social"} for h in hits)
    top = api.get(
        "/api/v1/products/search", params={"sort": "popularity", "limit": 3}, headers=key_a
    ).json()
    totals = [h["interactions"]["total"] for h in top["results"]]
    assert totals == sorted(totals, reverse=True) and totals[0] > 0
    social = api.get(
        "/api/v1/products/search",
        params={"sort": "popularity", "limit": 3, "channel": "social", "since": "last 30 days"},
        headers=key_a,
    ).json()["results"]
    counts = [h["interactions"] for h in social]
    assert [c["total"] for c in counts] == sorted((c["social"] for c in counts), reverse=True)
    assert all(c["web"] == c["cctv"] == 0 for c in counts) and counts[0]["total"] > 0
    priciest = api.get(
        "/api/v1/products/search",
        params={"sort": "priciest", "category": "Tents", "limit": 3},
        headers=key_a,
    ).json()["results"]
    prices = [h["price"] for h in priciest]
    assert len(prices) == 3 and prices == sorted(prices, reverse=True)
    assert {h["category"] for h in priciest} == {"Tents"}


def test_interaction_search_filters_inside_the_search(api, key_a):
    r = api.get(
        f"/api/v1/interactions/organization/{A}/search",
        headers=key_a,
        params={"query": "queue checkout", "channel": "cctv", "since": "last week", "limit": 20},
    )
    hits = r.json()["results"]
    assert len(hits) == 20 and {h["channel"] for h in hits} == {"cctv"}
    assert min(h["occurred_at"] for h in hits) >= "2026-11-21"


def test_summary_matches_the_data(api, env, key_a):
    lake = env[1]
    s = api.get(f"/api/v1/interactions/organization/{A}/summary", headers=key_a).json()
    assert s["total"] == lake.count(A, "interactions") == 3000
    web = api.get(
        f"/api/v1/interactions/organization/{A}/summary", headers=key_a, params={"channel": "web"}
    )
    assert web.json()["total"] == s["by_channel"]["web"]


def test_pattern_search_by_type(api, key_a):
    r = api.get(
        f"/api/v1/patterns/organization/{A}/search",
        headers=key_a,
        params={"query": "trend", "type": "anomaly", "limit": 50},
    )
    hits = r.json()["results"]
    assert hits and {h["type"] for h in hits} == {"anomaly"}


def test_no_route_returns_another_orgs_rows(api, env, key_a):
    lake = env[1]
    for path, collection, params in [
        ("/api/v1/products/search", "products", {"query": "organic bananas"}),
        (
            f"/api/v1/interactions/organization/{A}/search",
            "interactions",
            {"query": "delivery basket"},
        ),
        (f"/api/v1/patterns/organization/{A}/search", "patterns", {"query": "plant-based"}),
        ("/api/v1/qna/search", "documents", {"query": "Fresh Mart grocery"}),
    ]:
        own = {
            (r["id"], r.get("title") or r.get("text"))
            for r in lake.read_table(A, collection).to_pylist()
        }
        got = api.get(path, params={**params, "limit": 20}, headers=key_a).json()["results"]
        assert got and all((h["id"], h.get("title") or h.get("text")) in own for h in got), path
    # naming another org in the path or the query is a 403, never its data
    assert_error(
        api.get(
            f"/api/v1/interactions/organization/{B}/search", params={"query": "x"}, headers=key_a
        ),
        403,
        "wrong_organization",
    )
    assert_error(
        api.get(f"/api/v1/patterns/organization/{B}/search", params={"query": "x"}, headers=key_a),
        403,
        "wrong_organization",
    )
    assert_error(
        api.get(f"/api/v1/interactions/organization/{B}/summary", headers=key_a),
        403,
        "wrong_organization",
    )
    assert_error(
        api.get("/api/v1/qna/search", params={"query": "x", "organizationId": B}, headers=key_a),
        403,
        "wrong_organization",
    )


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/api/v1/products/search", {"query": "x", "limit": 0}),
        ("/api/v1/products/search", {"query": "x", "sort": "price"}),
        ("/api/v1/products/search", {}),
        ("/api/v1/products/search", {"sort": "popularity", "channel": "tv"}),
        ("/api/v1/products/search", {"sort": "popularity", "since": "the other day"}),
        (f"/api/v1/interactions/organization/{A}/search", {"query": "x", "channel": "tv"}),
        (f"/api/v1/interactions/organization/{A}/search", {"query": "x", "since": "the other day"}),
        (
            f"/api/v1/interactions/organization/{A}/summary",
            {"since": "2026-11-10", "until": "2026-11-01"},
        ),
        (f"/api/v1/patterns/organization/{A}/search", {"query": "x", "type": "fad"}),
        ("/api/v1/qna/search", {"query": ""}),
        ("/api/v1/qna/search", {"query": "x", "topK": 500}),
    ],
)
def test_bad_parameters_are_422(api, path, params, key_a):
    assert_error(api.get(path, params=params, headers=key_a), 422, "invalid_request")


def test_indexing_one_document_makes_it_searchable_at_once(api, env, key_a):
    doc = {
        "title": "Holiday opening hours",
        "context_type": "policy",
        "body": "Zanzibar marmalade festival hours: all stores open until midnight.",
    }
    r = api.post("/api/v1/qna/index", json=doc, headers=key_a)
    assert r.status_code == 201, r.text
    hits = api.get(
        "/api/v1/qna/search",
        params={"query": "zanzibar marmalade festival", "topK": 1},
        headers=key_a,
    )
    assert ids_of(hits) == [r.json()["id"]]
    other = api.get(
        "/api/v1/qna/search",
        params={"query": "zanzibar marmalade festival", "topK": 3},
        headers=key_headers(env[2], B),
    )
    assert other.status_code == 200 and r.json()["id"] not in ids_of(other)
    assert_error(
        api.post("/api/v1/qna/index", json={"title": "x"}, headers=key_a), 422, "invalid_request"
    )


def test_indexing_status_says_what_is_searchable_and_the_job_running(api, env, key_a):
    """GET /api/v1/qna/indexing: the dashboard's banner. An organization without indexes is
    not searchable; its reindex job shows with rows done of rows total, then it is."""
    _, lake, store, *_ = env
    lake.register_org("new-shop", "New Shop")
    lake.write("new-shop", "patterns", [lake.read_table(A, "patterns").to_pylist()[:5]])
    key = key_headers(store, "new-shop")
    status = api.get("/api/v1/qna/indexing", headers=key).json()
    assert status["searchable"] is False and status["job"] is None
    assert status["collections"] == dict.fromkeys(
        ["products", "interactions", "patterns", "org_context"]
    )
    r = api.post("/api/v1/qna/reindex", json={"collections": ["patterns"]}, headers=key)
    assert r.status_code == 202, r.text
    deadline = time.monotonic() + 30
    while (status := api.get("/api/v1/qna/indexing", headers=key).json())["job"]["state"] in {
        "pending",
        "running",
    }:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    job = status["job"]
    assert job["id"] == r.json()["id"] and job["state"] == "succeeded"
    assert job["rows_done"] == job["rows_total"] == 5 and job["timings"]["total_s"] >= 0
    assert status["collections"]["patterns"] and status["searchable"] is False  # 1 of 4 built
    assert api.get("/api/v1/qna/indexing", headers=key_a).json()["searchable"] is True


def test_reindex_job_runs_and_reports_progress(api, env, key_a):
    r = api.post(
        "/api/v1/qna/reindex", json={"collections": ["patterns", "org_context"]}, headers=key_a
    )
    assert r.status_code == 202, r.text
    job_id = r.json()["id"]
    deadline = time.monotonic() + 30
    while (job := api.get(f"/api/v1/qna/reindex/{job_id}", headers=key_a).json())["state"] not in {
        "succeeded",
        "failed",
    }:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert job["state"] == "succeeded" and job["rows_done"] >= 40 + 25
    assert_error(
        api.get(f"/api/v1/qna/reindex/{job_id}", headers=key_headers(env[2], B)),
        404,
        "job_not_found",
    )
    assert_error(
        api.post("/api/v1/qna/reindex", json={"collections": ["nope"]}, headers=key_a),
        422,
        "invalid_request",
    )


def test_searches_keep_working_while_versions_switch(env):
    _, lake, _, search, embedder, _ = env
    index_store = search.store
    query = embedder.embed(["trail runner"])
    errors: list[BaseException] = []
    stop = False

    def searcher():
        while not stop:
            try:
                assert search.search(A, "products", query, k=5)
            except BaseException as exc:
                errors.append(exc)

    async def run():
        nonlocal stop
        task = asyncio.get_running_loop().run_in_executor(None, searcher)
        before = index_store.current(A, "products")
        for _ in range(3):
            await asyncio.to_thread(
                build_index, lake, index_store, embedder.embed, A, "products", model=embedder.name
            )
        deadline = time.monotonic() + 10
        while search.versions().get(f"{A}/products") != index_store.current(A, "products"):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        stop = True
        await task
        return before

    before = asyncio.run(run())
    assert not errors
    assert search.versions()[f"{A}/products"] != before


def test_a_killed_build_leaves_the_old_version_serving(env):
    _, _, _, search, embedder, _ = env
    index_store = search.store
    before = index_store.current(A, "patterns")
    staging = index_store.new_version(A, "patterns")  # a job that got this far, then died
    (staging / "index.faiss").write_bytes(b"half written")
    assert index_store.current(A, "patterns") == before
    hits = search.search(A, "patterns", embedder.embed(["trend"]), k=3)
    assert len(hits) == 3 and search.versions()[f"{A}/patterns"] == before


def test_a_second_reindex_of_a_running_collection_is_409_with_the_running_job(api, env):
    store = env[2]
    running = store.create_job_run(A, "reindex", collections=["patterns"])
    store.update_job_run(A, running["id"], state="running")
    try:
        r = api.post(
            "/api/v1/qna/reindex",
            json={"collections": ["products", "patterns"]},
            headers=key_headers(store, A),
        )
        error = assert_error(r, 409, "reindex_running")
        assert error["details"] == [{"job_id": running["id"], "state": "running"}]
        # another org, or a collection the running job doesn't cover, is not held up
        other = store.create_job_run(B, "reindex", collections=["patterns"])
        assert not other.get("already_running")
        assert not store.create_job_run(A, "reindex", collections=["products"]).get(
            "already_running"
        )
    finally:
        store.update_job_run(A, running["id"], state="succeeded")
