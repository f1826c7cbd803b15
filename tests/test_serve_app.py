"""The app graph of serve_config.yaml on a real local Ray Serve instance."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from jobs.seed_demo import main as seed
from tests.serve_support import serve_config_app

pytestmark = pytest.mark.serve
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    var = tmp_path_factory.mktemp("var")
    seed(["--data-root", str(var / "data"), "--end", "2026-11-29", "--org", "acme-outdoor"])
    with serve_config_app(var, "tests.serve_support:rule_model") as url:
        yield url


def test_health_ready_and_docs_through_the_serve_proxy(app_url):
    assert httpx.get(f"{app_url}/health").json() == {"status": "ok"}
    assert (
        httpx.get(f"{app_url}/ready").json()["status"] == "ready"
    )  # reaches the ChatStore replica
    assert "swagger" in httpx.get(f"{app_url}/docs").text.lower()


def test_ingest_and_org_checks_through_the_serve_proxy(app_url):
    row = {"id": "d-new", "title": "Holiday hours", "context_type": "policy", "body": "Open 8-22",
           "updated_at": "2026-11-20"}  # fmt: skip
    headers = {"X-Organization-Id": "acme-outdoor", "Content-Type": "application/x-ndjson"}
    r = httpx.post(f"{app_url}/api/v1/ingest/documents", content=json.dumps(row), headers=headers)
    assert r.status_code == 201, r.text
    assert r.json()["rows_total"] == 26
    r = httpx.post(f"{app_url}/api/v1/ingest/documents", content=json.dumps(row),
                   headers={**headers, "X-Organization-Id": "fresh-mart"})  # fmt: skip
    assert r.status_code == 404 and r.json()["error"]["code"] == "organization_not_found"


def test_chat_through_the_graph(app_url):
    headers = {"X-Organization-Id": "acme-outdoor"}
    session = httpx.post(f"{app_url}/api/v1/chat/sessions", headers=headers).json()
    r = httpx.post(f"{app_url}/api/v1/chat/sessions/{session['id']}/messages",
                   json={"content": "How many interactions do we have?"}, headers=headers, timeout=60)  # fmt: skip
    assert r.status_code == 200, r.text
    summary = httpx.get(
        f"{app_url}/api/v1/interactions/organization/acme-outdoor/summary", headers=headers
    ).json()
    assert r.json()["content"] == f"You have {summary['total']:,} interactions."
    assert r.json()["tool_steps"][0]["name"] == "get_interaction_summary"
    with httpx.stream("POST", f"{app_url}/api/v1/chat/sessions/{session['id']}/messages/stream",
                      json={"content": "Hi!"}, headers=headers, timeout=60) as stream:  # fmt: skip
        kinds = [line[7:] for line in stream.iter_lines() if line.startswith("event: ")]
    assert kinds == ["user_message", "text_delta", "sources", "done"]
    history = httpx.get(
        f"{app_url}/api/v1/chat/sessions/{session['id']}/messages", headers=headers
    ).json()
    assert [m["role"] for m in history["messages"]] == ["user", "assistant"] * 2


def test_openai_compatible_routes_reach_the_same_llm(app_url):
    assert httpx.get(f"{app_url}/v1/models").json()["data"][0]["object"] == "model"
    r = httpx.post(f"{app_url}/v1/chat/completions", timeout=60,
                   json={"model": "x", "messages": [{"role": "user", "content": "Hi"}]})  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].startswith("Hello!")
