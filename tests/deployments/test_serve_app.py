"""The app graph of serve_config.yaml on a real local Ray Serve instance."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

from testing.rule_model import STORY
from tests.conftest import assert_error
from tests.demo_env import seed_demo
from tests.serve_support import api_keys, serve_config_app

pytestmark = pytest.mark.serve
ORG, OTHER = "acme-outdoor", "fresh-mart"  # only ORG has data


class App(NamedTuple):
    url: str
    ha: dict[str, str]  # an editor key of ORG, as request headers
    hb: dict[str, str]  # an editor key of OTHER (an org without data)
    reader: dict[str, str]  # a reader key of ORG
    var: Path  # the app's var_dir


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    var = tmp_path_factory.mktemp("var")
    seed_demo(var, ORG)
    keys = api_keys(var, [ORG, OTHER])  # before the app starts: one writer once it runs
    reader = api_keys(var, [ORG], role="reader")[ORG]
    with serve_config_app(var, "testing.rule_model:rule_model") as url:
        yield App(url, keys[ORG], keys[OTHER], reader, var)


def test_health_ready_and_docs_through_the_serve_proxy(app):
    url = app.url  # public routes: no key
    assert httpx.get(f"{url}/health").json() == {"status": "ok"}
    assert httpx.get(f"{url}/ready").json()["status"] == "ready"  # reaches the ChatStore replica
    assert "swagger" in httpx.get(f"{url}/docs").text.lower()


def test_keys_guard_every_api_route_through_the_serve_proxy(app):
    url = app.url
    summary = f"{url}/api/v1/interactions/organization/{ORG}/summary"
    missing = httpx.get(summary, headers={"X-Organization-Id": ORG})
    assert_error(missing, 401, "unauthorized")
    assert missing.headers["WWW-Authenticate"].startswith("Bearer")
    bad = httpx.get(summary, headers={"Authorization": "Bearer crow_no-such-key"})
    assert_error(bad, 401, "invalid_key")
    assert "invalid_token" in bad.headers["WWW-Authenticate"]
    assert httpx.get(summary, headers={"Authorization": app.ha["Authorization"]}).status_code == 200
    # Another org: named in the header or in the path, with ORG's key: refused.
    assert_error(
        httpx.get(summary, headers={**app.ha, "X-Organization-Id": OTHER}),
        403,
        "wrong_organization",
    )
    other_path = f"{url}/api/v1/interactions/organization/{OTHER}/summary"
    assert_error(httpx.get(other_path, headers=app.ha), 403, "wrong_organization")


def test_ingest_and_org_checks_through_the_serve_proxy(app):
    url = app.url
    row = {
        "id": "d-new",
        "title": "Holiday hours",
        "context_type": "policy",
        "body": "Open 8-22",
        "updated_at": "2026-11-20",
    }
    ndjson = {"Content-Type": "application/x-ndjson"}
    ingest = f"{url}/api/v1/ingest/documents"
    r = httpx.post(ingest, content=json.dumps(row), headers={**app.ha, **ndjson})
    assert r.status_code == 201, r.text
    assert r.json()["rows_total"] == 26
    r = httpx.post(
        ingest, content=json.dumps(row), headers={**app.ha, **ndjson, "X-Organization-Id": OTHER}
    )
    assert_error(r, 403, "wrong_organization")
    r = httpx.post(ingest, content=json.dumps(row), headers={**app.hb, **ndjson})
    assert_error(r, 404, "organization_not_found")  # OTHER's key, but OTHER has no data
    r = httpx.post(ingest, content=json.dumps(row), headers={**app.reader, **ndjson})
    assert_error(r, 403, "forbidden")  # ingest needs the editor role
    r = httpx.post(ingest, content=json.dumps(row), headers={"X-Organization-Id": ORG, **ndjson})
    assert_error(r, 401, "unauthorized")


def test_chat_through_the_graph(app):
    url, headers = app.url, app.ha
    session = httpx.post(f"{url}/api/v1/chat/sessions", headers=headers).json()
    r = httpx.post(
        f"{url}/api/v1/chat/sessions/{session['id']}/messages",
        json={"content": "How many interactions do we have?"},
        headers=headers,
        timeout=60,
    )
    assert r.status_code == 200, r.text
    summary = httpx.get(
        f"{url}/api/v1/interactions/organization/{ORG}/summary", headers=headers
    ).json()
    assert r.json()["content"] == f"You have {summary['total']:,} interactions."
    assert r.json()["tool_steps"][0]["name"] == "get_interaction_summary"
    with httpx.stream(
        "POST",
        f"{url}/api/v1/chat/sessions/{session['id']}/messages/stream",
        json={"content": "Hi!"},
        headers=headers,
        timeout=60,
    ) as stream:
        kinds = [line[7:] for line in stream.iter_lines() if line.startswith("event: ")]
    assert kinds == ["user_message", "text_delta", "sources", "done"]
    history = httpx.get(
        f"{url}/api/v1/chat/sessions/{session['id']}/messages", headers=headers
    ).json()
    assert [m["role"] for m in history["messages"]] == ["user", "assistant"] * 2


def test_closing_the_stream_stops_the_answer_in_the_orchestrator(app):
    """Stop through the graph: the client closes the answer's stream; the Orchestrator's
    answer is cancelled and what it wrote is stored, marked stopped."""
    url, headers = app.url, app.ha
    sid = httpx.post(f"{url}/api/v1/chat/sessions", headers=headers).json()["id"]
    seen = ""
    with httpx.stream(
        "POST",
        f"{url}/api/v1/chat/sessions/{sid}/messages/stream",
        json={"content": "Tell me a story"},
        headers=headers,
        timeout=60,
    ) as stream:
        for line in stream.iter_lines():
            if line.startswith("data: ") and '"text_delta"' in line:
                seen += json.loads(line[6:])["text"]
                if "Chapter 3 " in seen:
                    break  # closes the stream
    messages: list[dict] = []
    # stored by a task of its own after the cancel (once lost in CI: Serve cancelled it as
    # a child call of the cancelled request; test_stop_regenerate pins the fix)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(messages) < 2:
        time.sleep(0.2)
        messages = httpx.get(f"{url}/api/v1/chat/sessions/{sid}/messages", headers=headers).json()[
            "messages"
        ]
    assert [m["role"] for m in messages] == ["user", "assistant"], messages
    stopped = messages[1]
    assert stopped["stopped"] is True and stopped["content"].startswith(seen)
    assert len(stopped["content"]) < len(STORY) / 2, "the answer ran on after the stop"


def test_a_small_reindex_runs_in_the_reindex_replica_and_is_searchable(app):
    """Below reindex.in_process_max_rows, ReindexControl builds the index itself through the
    Embedder deployment (no Ray Job): the record moves like a job's and says per stage where
    the time went; the new version is searched at once."""
    url = app.url
    r = httpx.post(f"{url}/api/v1/qna/reindex", json={"collections": ["patterns"]}, headers=app.ha)
    assert r.status_code == 202, r.text
    status = f"{url}/api/v1/qna/reindex/{r.json()['id']}"
    deadline = time.monotonic() + 120
    while (job := httpx.get(status, headers=app.ha).json())["state"] in {"pending", "running"}:
        assert time.monotonic() < deadline, job
        time.sleep(0.2)
    assert job["state"] == "succeeded", job["detail"]
    assert job["rows_done"] == job["rows_total"] == 40
    assert {"start_s", "embed_s", "index_s", "total_s"} <= set(job["timings"])
    assert "ray_status" not in job  # not a Ray Job
    search = f"{url}/api/v1/patterns/organization/{ORG}/search"
    hits = httpx.get(search, params={"query": "weekend"}, headers=app.ha)
    assert hits.status_code == 200 and hits.json()["results"], hits.text


def test_openai_compatible_routes_reach_the_same_llm(app):
    url, headers = app.url, {"Authorization": app.ha["Authorization"]}
    assert_error(httpx.get(f"{url}/v1/models"), 401, "unauthorized")
    assert httpx.get(f"{url}/v1/models", headers=headers).json()["data"][0]["object"] == "model"
    body = {"model": "x", "messages": [{"role": "user", "content": "Hi"}]}
    assert_error(
        httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60), 401, "unauthorized"
    )
    r = httpx.post(f"{url}/v1/chat/completions", timeout=60, json=body, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("Hello!")


def test_keys_cli_writes_through_the_app_only_to_the_database_it_names(
    app, tmp_path, monkeypatch, capsys
):
    """`jobs.keys create` next to a running app: with the app's var_dir the key is created
    by the app's ChatStore (and works at once); with another var_dir it goes to that
    directory's file, never into the running app's database."""
    from jobs import keys

    other = tmp_path / "other-var"
    seed_demo(other, ORG)
    orgs = f"{app.url}/api/v1/organizations"
    for var, works in ((app.var, True), (other, False)):
        monkeypatch.setenv("CROW_VAR_DIR", str(var))
        assert keys.main(["--config", "none", "create", "--org", ORG, "--role", "reader"]) == 0
        key = capsys.readouterr().out.strip().splitlines()[-1]
        status = httpx.get(orgs, headers={"Authorization": f"Bearer {key}"}).status_code
        assert status == (200 if works else 401), (var, status)
    from crow.store.chat_store import ChatStore

    written = ChatStore(other / "chat.duckdb")
    try:
        assert [k["role"] for k in written.list_api_keys(ORG)] == ["reader"]
    finally:
        written.close()
