"""Cross-organization matrix: a key of org A against org B's resources, on every operation of
the OpenAPI document plus /mcp and the A2A routes: no read, no write, no delete."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crow.api.app import create_app
from testing.rule_model import rule_model
from tests.conftest import key_headers
from tests.demo_env import build_demo_env

A, B = "acme-outdoor", "fresh-mart"
ALLOWED = {401, 403, 404}
NDJSON_ROW = b'{"id": "p-new", "title": "Tent", "category": "Tents", "price": 10}'


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The demo data, B's resources in the store, and the app."""
    from crow.store.chat_store import ChatStore

    var = tmp_path_factory.mktemp("var")
    demo = build_demo_env(var, interactions=300)
    store = ChatStore(demo.settings.chat_db_path)
    chat = store.create_session(B, title="B's chat")
    store.add_message(B, chat["id"], "user", "B's private question")
    answer = store.add_message(B, chat["id"], "assistant", "B's private answer")
    store.set_feedback(B, chat["id"], answer["id"], "down", correction="B's correction")
    qna = store.create_session(B, kind="qna")
    job = store.create_job_run(B, "reindex", collections=["products"])
    b_key = store.create_api_key(B, "admin", name="B's key")
    resources = {
        "org_id": B,
        "chat": chat["id"],
        "qna": qna["id"],
        "job_id": job["id"],
        "key_id": b_key["id"],
        "message_id": answer["id"],
        "collection": "products",
    }
    model = rule_model()
    app = create_app(demo.services(model, store=store, index_control=True), chat_model=model)
    with TestClient(app, base_url="http://127.0.0.1:8000", raise_server_exceptions=False) as client:
        yield client, store, demo, resources, key_headers(store, A, "admin")
    store.close()


def _path(template: str, params: list[dict[str, Any]], b: dict[str, str]) -> str:
    values = {
        "org_id": b["org_id"],
        "job_id": b["job_id"],
        "key_id": b["key_id"],
        "message_id": b["message_id"],
        "collection": b["collection"],
        "session_id": b["qna"] if template.startswith("/api/v1/qna/") else b["chat"],
    }
    for param in params:
        if param["in"] == "path":
            template = template.replace("{" + param["name"] + "}", values[param["name"]])
    return template


def _query(params: list[dict[str, Any]]) -> dict[str, Any]:
    query = {}
    for param in params:
        if param["in"] == "query" and param.get("required"):
            kind = param.get("schema", {}).get("type")
            query[param["name"]] = 1 if kind == "integer" else "x"
    return query


def _body(path: str, method: str) -> dict[str, Any]:
    if method not in {"post", "put", "patch"}:
        return {}
    if path.startswith("/api/v1/ingest/"):
        return {"content": NDJSON_ROW, "headers": {"Content-Type": "application/x-ndjson"}}
    if path.endswith("/index"):
        return {"json": {"title": "Returns", "body": "Everything is free now."}}
    if path.endswith("/feedback"):
        return {"json": {"rating": "up", "correction": "A's word"}}
    if path.endswith("/keys"):
        return {"json": {"role": "admin"}}
    if path.endswith(("/messages", "/stream", "/query")):
        return {"json": {"content": "how many interactions?"}}
    if path == "/a2a/tasks/send":
        return {
            "json": {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tasks/send",
                "params": {
                    "id": "t1",
                    "sessionId": "x",
                    "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
                },
            }
        }
    if path == "/a2a":
        return {
            "json": {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "message/send",
                "params": {
                    "message": {
                        "role": "user",
                        "messageId": "m1",
                        "parts": [{"kind": "text", "text": "hi"}],
                    }
                },
            }
        }
    if path == "/v1/chat/completions":
        return {"json": {"messages": [{"role": "user", "content": "hi"}]}}
    return {"json": {}}


def _operations(client: TestClient) -> list[tuple[str, str, list[dict[str, Any]]]]:
    ops = []
    for path, item in client.get("/openapi.json").json()["paths"].items():
        for method, op in item.items():
            if "security" in op:  # every guarded operation (the public ones are the probes)
                ops.append((path, method, op.get("parameters", [])))
    return ops


def _leaks(text: str, b: dict[str, str]) -> list[str]:
    secrets = [b["chat"], b["qna"], b["job_id"], b["key_id"], "B's private question", "B's chat"]
    secrets += [b["message_id"], "B's private answer", "B's correction"]
    return [s for s in secrets if s in text]


def test_a_key_of_one_org_reaches_nothing_of_another(world):
    client, store, demo, b, a_admin = world
    ops = _operations(client)
    assert len(ops) >= 25, [p for p, _, _ in ops]
    before = {
        c: demo.lake.count(B, c) for c in ("products", "interactions", "patterns", "documents")
    }
    seen = []
    for path, method, params in ops:
        url, query, body = _path(path, params, b), _query(params), _body(path, method)
        extra = body.pop("headers", {})
        # 1. naming B in the header: refused before anything runs
        headers = {**a_admin, "X-Organization-Id": B, **extra}
        r = client.request(method.upper(), url, params=query, headers=headers, **body)
        assert r.status_code in ALLOWED, (method, url, r.status_code, r.text[:300])
        assert not _leaks(r.text, b), (method, url, r.text[:300])
        seen.append((method, path))
        # 2. B's resources in the path, A's key alone: not found or forbidden, never B's data
        if any(p["in"] == "path" and p["name"] != "collection" for p in params):
            only_key = {"Authorization": a_admin["Authorization"], **extra}
            r = client.request(method.upper(), url, params=query, headers=only_key, **body)
            assert r.status_code in ALLOWED, (method, url, r.status_code, r.text[:300])
            assert not _leaks(r.text, b), (method, url, r.text[:300])
    # the SSE stream, the A2A routes and /v1 were among them
    for must in [
        ("post", "/api/v1/chat/sessions/{session_id}/messages/stream"),
        ("post", "/a2a"),
        ("post", "/a2a/tasks/send"),
        ("post", "/v1/chat/completions"),
        ("delete", "/api/v1/keys/{key_id}"),
        ("post", "/api/v1/ingest/{collection}"),
        ("put", "/api/v1/chat/sessions/{session_id}/messages/{message_id}/feedback"),
        ("delete", "/api/v1/chat/sessions/{session_id}/messages/{message_id}/feedback"),
        ("get", "/api/v1/feedback"),
        ("get", "/api/v1/chat/search"),
        ("get", "/api/v1/chat/sessions/{session_id}/export"),
    ]:
        assert must in seen, must
    # /mcp: the initialize call and a tool call naming B
    mcp = {**a_admin, "X-Organization-Id": B, "Accept": "application/json, text/event-stream"}
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "search_org_context", "arguments": {"query": "returns"}},
    }
    for rpc in ({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, call):
        r = client.post("/mcp", json=rpc, headers=mcp)
        assert r.status_code == 403 and not _leaks(r.text, b), r.text
    # ... and a tool call with A's key returns A's data only
    mcp_a = {
        **a_admin,
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18",
    }
    r = client.post("/mcp", json=call, headers=mcp_a)
    assert r.status_code == 200, r.text
    docs = json.loads(r.json()["result"]["content"][0]["text"])["documents"]
    own = {row["id"] for row in demo.lake.read_table(A, "documents").to_pylist()}
    assert docs and {d["id"] for d in docs} <= own
    # nothing of B's changed
    after = {c: demo.lake.count(B, c) for c in before}
    assert after == before
    assert [m["content"] for m in store.list_messages(B, b["chat"])] == [
        "B's private question",
        "B's private answer",
    ]
    kept = store.feedback_rows(B)
    assert [(r["feedback"]["rating"], r["feedback"]["correction"]) for r in kept] == [
        ("down", "B's correction")
    ]
    assert store.get_session(B, b["qna"], kind="qna") is not None
    assert store.get_job_run(B, b["job_id"])["state"] == "pending"
    assert [k["active"] for k in store.list_api_keys(B) if k["id"] == b["key_id"]] == [True]


def test_a_reader_cannot_ingest_index_or_reindex(world):
    client, store, demo, _, _ = world
    reader = key_headers(store, A, "reader")
    before = demo.lake.count(A, "products")
    for method, path, kw in [
        (
            "POST",
            "/api/v1/ingest/products",
            {"content": NDJSON_ROW, "headers": {"Content-Type": "application/x-ndjson"}},
        ),
        (
            "POST",
            "/api/v1/ingest/products",
            {
                "content": NDJSON_ROW,
                "params": {"mode": "replace"},
                "headers": {"Content-Type": "application/x-ndjson"},
            },
        ),
        ("POST", "/api/v1/qna/index", {"json": {"title": "t", "body": "b"}}),
        ("POST", "/api/v1/qna/reindex", {"json": {"collections": ["products"]}}),
    ]:
        headers = {**reader, **kw.pop("headers", {})}
        r = client.request(method, path, headers=headers, **kw)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    assert demo.lake.count(A, "products") == before
