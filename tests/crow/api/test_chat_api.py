"""Chat routes in-process: scripted model, real tools over the indexed demo data, real store."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from fastapi.testclient import TestClient

from crow.api.app import create_app
from models.errors import ModelTimeout, ModelUnavailable
from models.messages import AssistantTurn, ToolCall
from models.testing import ScriptedChatModel
from tests.conftest import assert_error
from tests.demo_env import build_demo_env

A, B = "acme-outdoor", "fresh-mart"
BASE = "/api/v1/chat/sessions"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


@pytest.fixture
def app(demo, store):
    model = ScriptedChatModel()
    services = demo.services(model, store=store)
    with TestClient(create_app(services), raise_server_exceptions=False) as client:
        yield client, model, store


def new_session(client, headers) -> str:
    r = client.post(BASE, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def test_send_answers_with_sources_steps_and_timings(app, ha):
    client, model, _ = app
    sid = new_session(client, ha)
    model.add(
        AssistantTurn(
            tool_calls=(
                ToolCall(
                    id="c", name="search_products", arguments={"sort": "popularity", "limit": 3}
                ),
            )
        ),
        lambda messages, tools, params: AssistantTurn(
            text="Top three: "
            + ", ".join(p["title"] for p in json.loads(messages[-1].content)["products"])
        ),
    )
    r = client.post(
        f"{BASE}/{sid}/messages", json={"content": "What are our top products?"}, headers=ha
    )
    assert r.status_code == 200, r.text
    msg = r.json()
    assert msg["role"] == "assistant" and [s["type"] for s in msg["sources"]] == ["product"] * 3
    assert msg["content"].splitlines()[-1].startswith('[3] Product: "')
    assert msg["tool_steps"][0]["name"] == "search_products" and msg["timings"]["total_s"] >= 0
    session = client.get(f"{BASE}/{sid}", headers=ha).json()
    assert session["title"] == "What are our top products?" and session["message_count"] == 2


def test_title_is_first_six_words_at_most_40_chars(app, ha):
    client, model, _ = app
    sid = new_session(client, ha)
    model.add(AssistantTurn(text="Hello!"))
    client.post(
        f"{BASE}/{sid}/messages",
        json={"content": "hello there could you please tell me everything"},
        headers=ha,
    )
    assert (
        client.get(f"{BASE}/{sid}", headers=ha).json()["title"]
        == "hello there could you please tell"
    )


def test_org_scoping_and_unknown_sessions(app, ha, hb):
    client, model, _ = app
    sid = new_session(client, ha)
    for method, path, body in [
        ("get", f"{BASE}/{sid}", None),
        ("get", f"{BASE}/{sid}/messages", None),
        ("delete", f"{BASE}/{sid}", None),
        ("post", f"{BASE}/{sid}/messages", {"content": "hi"}),
        ("post", f"{BASE}/{sid}/messages/stream", {"content": "hi"}),
    ]:
        kwargs = {"json": body} if body else {}
        assert_error(getattr(client, method)(path, headers=hb, **kwargs), 404, "session_not_found")
        assert_error(
            getattr(client, method)(path.replace(sid, "ses_nope"), headers=ha, **kwargs),
            404,
            "session_not_found",
        )
        assert_error(getattr(client, method)(path, **kwargs), 401, "unauthorized")
    assert_error(client.get(f"{BASE}/organization/{B}", headers=ha), 403, "wrong_organization")
    assert client.get(f"{BASE}/{sid}", headers=ha).status_code == 200  # untouched by B's attempts
    model.assert_complete()


def test_empty_and_oversized_messages(app, ha):
    client, _, store = app
    sid = new_session(client, ha)
    assert_error(
        client.post(f"{BASE}/{sid}/messages", json={"content": "   "}, headers=ha),
        422,
        "invalid_request",
    )
    assert_error(client.post(f"{BASE}/{sid}/messages", json={}, headers=ha), 422, "invalid_request")
    assert_error(
        client.post(f"{BASE}/{sid}/messages", json={"content": "x" * 4001}, headers=ha),
        413,
        "payload_too_large",
    )
    assert_error(
        client.post(
            f"{BASE}/{sid}/messages",
            content=b'{"content": "' + b"x" * 300_000 + b'"}',
            headers={**ha, "Content-Type": "application/json"},
        ),
        413,
        "payload_too_large",
    )
    assert store.list_messages(A, sid) == []


def test_history_pagination_boundaries(app, ha):
    client, _, store = app
    sid = new_session(client, ha)
    for i in range(5):
        store.add_message(A, sid, "user", f"m{i}")
    page = client.get(f"{BASE}/{sid}/messages", params={"limit": 2}, headers=ha).json()
    assert [m["content"] for m in page["messages"]] == ["m3", "m4"] and page["has_more"]
    page = client.get(
        f"{BASE}/{sid}/messages", params={"limit": 2, "before": page["next_before"]}, headers=ha
    ).json()
    assert [m["content"] for m in page["messages"]] == ["m1", "m2"]
    page = client.get(f"{BASE}/{sid}/messages", params={"limit": 2, "before": 2}, headers=ha).json()
    assert [m["content"] for m in page["messages"]] == ["m0"] and not page["has_more"]
    assert (
        client.get(f"{BASE}/{sid}/messages", params={"limit": 5}, headers=ha).json()["has_more"]
        is False
    )
    assert_error(
        client.get(f"{BASE}/{sid}/messages", params={"limit": 0}, headers=ha),
        422,
        "invalid_request",
    )
    assert_error(
        client.get(f"{BASE}/{sid}/messages", params={"before": 0}, headers=ha),
        422,
        "invalid_request",
    )
    # past the store's 64-bit integers (found by tests/fuzzing.py): 422, not a 500
    huge = 85824793222938986807296
    assert_error(
        client.get(f"{BASE}/{sid}/messages", params={"before": huge}, headers=ha),
        422,
        "invalid_request",
    )
    assert_error(
        client.get(f"{BASE}/organization/{A}", params={"offset": huge}, headers=ha),
        422,
        "invalid_request",
    )


def test_org_sessions_newest_first_paginated(app, ha, hb):
    client, _, store = app
    ids = [new_session(client, ha) for _ in range(3)]
    store.add_message(A, ids[0], "user", "bump")
    page = client.get(f"{BASE}/organization/{A}", params={"limit": 2}, headers=ha).json()
    assert page["total"] == 3 and page["sessions"][0]["id"] == ids[0]
    rest = client.get(
        f"{BASE}/organization/{A}", params={"limit": 2, "offset": 2}, headers=ha
    ).json()
    assert len(rest["sessions"]) == 1
    assert client.get(f"{BASE}/organization/{B}", headers=hb).json()["total"] == 0


def test_delete_removes_the_session_and_its_messages(app, ha):
    client, _, store = app
    sid = new_session(client, ha)
    store.add_message(A, sid, "user", "to be deleted")
    assert client.delete(f"{BASE}/{sid}", headers=ha).status_code == 204
    assert_error(client.get(f"{BASE}/{sid}/messages", headers=ha), 404, "session_not_found")
    assert (
        store._query("SELECT count(*) AS n FROM messages WHERE session_id = ?", [sid])[0]["n"] == 0
    )


def test_model_failure_is_503_and_keeps_the_question(app, ha):
    client, model, store = app
    sid = new_session(client, ha)
    model.add(ModelUnavailable("no model"), ModelUnavailable("still none"))
    assert_error(
        client.post(f"{BASE}/{sid}/messages", json={"content": "How many?"}, headers=ha),
        503,
        "model_unavailable",
    )
    model.add(ModelTimeout("slow"), ModelTimeout("slow"))
    assert_error(
        client.post(f"{BASE}/{sid}/messages", json={"content": "How many?"}, headers=ha),
        504,
        "model_timeout",
    )
    assert [m["role"] for m in store.list_messages(A, sid)] == ["user", "user"]


def test_streaming_send_emits_tool_steps_then_answer(app, ha):
    client, model, _ = app
    sid = new_session(client, ha)
    model.add(
        AssistantTurn(tool_calls=(ToolCall(id="c", name="get_interaction_summary", arguments={}),)),
        AssistantTurn(text="You have 3,000 interactions."),
    )
    with client.stream(
        "POST",
        f"{BASE}/{sid}/messages/stream",
        json={"content": "How many interactions?"},
        headers=ha,
    ) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [
            line.removeprefix("event: ") for line in r.iter_lines() if line.startswith("event: ")
        ]
    assert events == [
        "user_message",
        "tool_call_started",
        "tool_call_finished",
        "text_delta",
        "sources",
        "done",
    ]


def test_retry_with_the_same_message_id_is_answered_once(app, ha):
    client, model, store = app
    sid = new_session(client, ha)
    model.add(AssistantTurn(text="Hi!"))
    body = {"content": "Hello", "message_id": "client-1"}
    first = client.post(f"{BASE}/{sid}/messages", json=body, headers=ha)
    again = client.post(f"{BASE}/{sid}/messages", json=body, headers=ha)
    assert again.status_code == 200 and again.json() == first.json()  # the stored answer
    assert [m["role"] for m in store.list_messages(A, sid)] == ["user", "assistant"]
    model.assert_complete()  # the retry did not run the model again


def test_qna_answers_from_the_knowledge_base_with_footnotes(app, ha, hb):
    client, model, _ = app

    def answer_from_docs(messages, tools, params):
        assert not tools  # the documents are in the prompt; no tool choice for the model
        first = re.search(r"^## (.+) \((\w+)\)$", messages[0].content, re.M)
        return AssistantTurn(text=f"Per {first[1]} ({first[2]}): it depends.")

    model.add(answer_from_docs, answer_from_docs)
    r = client.post("/api/v1/qna/query", json={"content": "return policy"}, headers=ha)
    assert r.status_code == 200, r.text
    title, kind = re.search(r"Per (.+) \((\w+)\):", r.json()["content"]).groups()
    assert r.json()["content"].endswith(f'[1] Org context: "{title}" ({kind})')
    sid = client.post("/api/v1/qna/sessions", headers=ha).json()["id"]
    r = client.post(
        f"/api/v1/qna/sessions/{sid}/messages",
        json={"content": "return policy"},
        headers=ha,
    )
    assert r.json()["sources"][0]["type"] == "org_context"
    session = client.get(f"/api/v1/qna/sessions/{sid}", headers=ha).json()
    assert [m["role"] for m in session["messages"]] == ["user", "assistant"]
    # Q&A and chat sessions are separate; other orgs see nothing
    assert_error(client.get(f"{BASE}/{sid}", headers=ha), 404, "session_not_found")
    assert_error(client.get(f"/api/v1/qna/sessions/{sid}", headers=hb), 404, "session_not_found")
    assert_error(
        client.post(
            f"/api/v1/qna/sessions/{new_session(client, ha)}/messages",
            json={"content": "x"},
            headers=ha,
        ),
        404,
        "session_not_found",
    )
    assert client.get(f"{BASE}/organization/{A}", headers=ha).json()["total"] == 1


def test_metrics_record_routes_tools_and_iterations(demo, store, ha):
    from crow.metrics import MemoryMetrics

    metrics, model = MemoryMetrics(), ScriptedChatModel()
    services = dataclasses.replace(
        demo.services(model, store=store, metrics=metrics), metrics=metrics
    )
    model.add(
        AssistantTurn(tool_calls=(ToolCall(id="c", name="get_interaction_summary", arguments={}),)),
        AssistantTurn(text="3,000."),
    )
    with TestClient(create_app(services)) as client:
        sid = new_session(client, ha)
        client.post(f"{BASE}/{sid}/messages", json={"content": "How many?"}, headers=ha)
        client.get(f"{BASE}/ses_missing", headers=ha)
    assert (
        metrics.total(
            "crow_http_requests_total",
            route="/api/v1/chat/sessions/{session_id}/messages",
            status="200",
        )
        == 1
    )
    assert (
        metrics.total(
            "crow_http_requests_total", route="/api/v1/chat/sessions/{session_id}", status="404"
        )
        == 1
    )
    assert metrics.total("crow_tool_calls_total", tool="get_interaction_summary", ok="true") == 1
    assert metrics.observations["crow_agent_iterations"] == [2]


def test_a_full_queue_is_503_in_the_error_shape(demo, store, ha):
    from ray.serve.exceptions import BackPressureError

    from crow.api.errors import ApiError

    class Busy:
        async def send(self, *args, **kwargs):
            raise BackPressureError(num_queued_requests=64, max_queued_requests=64)

    services = dataclasses.replace(demo.services(store=store), chat=Busy())
    app = create_app(
        services, extra_errors={BackPressureError: ApiError(503, "overloaded", "busy")}
    )
    with TestClient(app, raise_server_exceptions=False) as client:
        sid = new_session(client, ha)
        assert_error(
            client.post(f"{BASE}/{sid}/messages", json={"content": "hi"}, headers=ha),
            503,
            "overloaded",
        )


def test_client_message_ids_are_scoped_to_their_session(app, ha, hb):
    client, model, store = app
    model.add(AssistantTurn(text="One."), AssistantTurn(text="Two."))
    first, second = new_session(client, ha), new_session(client, hb)
    a = client.post(
        f"{BASE}/{first}/messages", json={"content": "Q1", "message_id": "same"}, headers=ha
    )
    b = client.post(
        f"{BASE}/{second}/messages", json={"content": "Q2", "message_id": "same"}, headers=hb
    )
    assert (a.status_code, b.status_code) == (200, 200)
    assert (a.json()["content"], b.json()["content"]) == ("One.", "Two.")
    assert [m["content"] for m in store.list_messages(B, second)] == ["Q2", "Two."]


def test_regenerate_the_latest_answer_over_http(app, ha, hb):
    client, model, _ = app
    sid = new_session(client, ha)
    model.add(AssistantTurn(text="One."), AssistantTurn(text="Two."), AssistantTurn(text="Three."))
    first = client.post(f"{BASE}/{sid}/messages", json={"content": "Hi"}, headers=ha).json()
    second = client.post(f"{BASE}/{sid}/messages/{first['id']}/regenerate", headers=ha)
    assert second.status_code == 200, second.text
    assert second.json()["regenerated_from"] == first["id"] and second.json()["content"] == "Two."
    with client.stream(
        "POST", f"{BASE}/{sid}/messages/{second.json()['id']}/regenerate/stream", headers=ha
    ) as r:
        lines = [line for line in r.iter_lines() if line.startswith("event: ")]
    assert lines[0] == "event: regenerating" and lines[-1] == "event: done"
    history = client.get(f"{BASE}/{sid}/messages", headers=ha).json()["messages"]
    assert [m["content"] for m in history] == ["Hi", "One.", "Two.", "Three."]
    assert_error(
        client.post(f"{BASE}/{sid}/messages/{first['id']}/regenerate", headers=ha),
        409,
        "not_latest_answer",
    )
    assert_error(
        client.post(f"{BASE}/{sid}/messages/msg_nope/regenerate/stream", headers=ha),
        404,
        "message_not_found",
    )
    assert_error(  # another organization's session is not found, streamed or not
        client.post(f"{BASE}/{sid}/messages/{first['id']}/regenerate/stream", headers=hb),
        404,
        "session_not_found",
    )
