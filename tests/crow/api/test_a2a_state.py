"""A2A state lives in the chat store: any Ingress replica answers GetTask and continues a
conversation, tasks are their organization's, finished tasks expire."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from crow.api.app import create_app
from crow.settings import AppSettings
from testing.rule_model import rule_model
from tests.conftest import key_headers
from tests.demo_env import build_demo_env

A, B = "acme-outdoor", "fresh-mart"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"), interactions=200)


def send(client, headers, text: str, message_id: str, context_id: str | None = None) -> dict:
    message = {"role": "user", "messageId": message_id, "parts": [{"kind": "text", "text": text}]}
    if context_id:
        message["contextId"] = context_id
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
    r = client.post("/a2a", json=rpc, headers=headers)
    assert r.status_code == 200, r.text
    assert "result" in r.json(), r.text
    return r.json()["result"]


def get_task(client, headers, task_id: str) -> dict:
    rpc = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}}
    return client.post("/a2a", json=rpc, headers=headers).json()


def test_two_replicas_share_tasks_and_conversations(demo, store):
    """Two Ingress replicas (two apps over one chat store): a task made on one is read on
    the other, and a context continues on the other in the same chat session."""
    a, b = key_headers(store, A), key_headers(store, B)
    replicas = [
        TestClient(
            create_app(demo.services(rule_model(), store=store)), raise_server_exceptions=False
        )
        for _ in range(2)
    ]
    with replicas[0] as one, replicas[1] as two:
        task = send(one, a, "How many interactions do we have?", "m-1")
        assert task["status"]["state"] == "completed"
        seen = get_task(two, a, task["id"])
        assert seen["result"]["id"] == task["id"]
        assert seen["result"]["artifacts"][0]["parts"][0]["text"].startswith("You have")
        assert "error" in get_task(two, b, task["id"])  # another org's task: not found
        follow = send(two, a, "And again?", "m-2", context_id=task["contextId"])
        chat = {t["artifacts"][0]["metadata"]["chat_session_id"] for t in (task, follow)}
        assert len(chat) == 1  # one chat session across the replicas
        assert store.get_session(A, chat.pop())["message_count"] == 4


def test_finished_tasks_expire_after_the_retention(demo, store, monkeypatch):
    from datetime import datetime, timedelta

    import crow.store.db as store_db

    monkeypatch.setattr(
        demo,
        "settings",
        AppSettings.from_args(
            {"var_dir": str(demo.settings.var_dir), "limits": {"a2a_task_retention_h": 1}}
        ),
    )
    a = key_headers(store, A)
    with TestClient(create_app(demo.services(rule_model(), store=store))) as client:
        old = send(client, a, "How many interactions do we have?", "m-old")
        later = datetime.now().replace(microsecond=0) + timedelta(hours=2)
        monkeypatch.setattr(store_db, "now", lambda: later)
        send(client, a, "Hello", "m-new")
        assert "error" in get_task(client, a, old["id"])
        assert store.list_a2a_tasks(A) and len(store.list_a2a_tasks(A)) == 1
