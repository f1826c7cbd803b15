"""Idempotency under concurrency: a message id is answered once, whatever arrives when."""

from __future__ import annotations

import asyncio

import pytest
from fastapi.testclient import TestClient

from crow.api.app import create_app
from crow.chat.agent.config import AgentConfig
from crow.chat.service import AnswerInProgress, ChatService, SessionNotFound
from models.messages import AssistantTurn
from models.testing import ScriptedChatModel
from tests.conftest import assert_error
from tests.demo_env import build_demo_env

A = "acme-outdoor"
BASE = "/api/v1/chat/sessions"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"), interactions=200)


def chat_service(demo, store, model) -> ChatService:
    return demo.chat(model, store=store, config=AgentConfig())


@pytest.mark.faults
def test_concurrent_sends_with_one_message_id_run_the_model_once(demo, store):
    model = ScriptedChatModel(latency_s=0.3)
    model.add(AssistantTurn(text="Once."))  # a second model run would find no script: an error
    chat = chat_service(demo, store, model)
    sid = store.create_session(A)["id"]

    async def eight_at_once():
        return await asyncio.gather(
            *(chat.send(A, sid, "How many?", message_id="m-1") for _ in range(8))
        )

    answers = asyncio.run(eight_at_once())
    assert {a["id"] for a in answers} == {answers[0]["id"]} and answers[0]["content"] == "Once."
    assert len(model.calls) == 1
    assert [m["role"] for m in store.list_messages(A, sid)] == ["user", "assistant"]


def test_qna_messages_take_an_idempotency_key_too(demo, store):
    model = ScriptedChatModel()
    model.add(AssistantTurn(text="Sixty days."))
    chat = chat_service(demo, store, model)
    sid = store.create_session(A, kind="qna")["id"]
    first = asyncio.run(chat.ask_kb(A, "Return window?", session_id=sid, message_id="q-1"))
    again = asyncio.run(chat.ask_kb(A, "Return window?", session_id=sid, message_id="q-1"))
    assert again["id"] == first["id"] and len(model.calls) == 1
    assert len(store.list_messages(A, sid)) == 2


def test_a_retry_while_the_first_is_still_answering_waits_then_gives_up(demo, store, monkeypatch):
    import crow.chat.service

    monkeypatch.setattr(crow.chat.service, "IN_PROGRESS_WAIT_S", 0.2)
    chat = chat_service(demo, store, ScriptedChatModel())
    sid = store.create_session(A)["id"]
    store.add_message(A, sid, "user", "How many?", message_id=f"{sid}:m-2")
    assert store.claim_answer(A, f"{sid}:m-2:answer", stale_after_s=600)  # being answered
    with pytest.raises(AnswerInProgress):
        asyncio.run(chat.send(A, sid, "How many?", message_id="m-2"))
    # a claim older than the takeover time is a crashed request's: the retry answers
    monkeypatch.setattr(crow.chat.service, "TAKEOVER_AFTER_S", 0.0)
    model = chat.agent.model
    model.add(AssistantTurn(text="Taken over."))
    assert asyncio.run(chat.send(A, sid, "How many?", message_id="m-2"))["content"] == "Taken over."


def test_a_retry_after_a_failed_answer_answers(demo, store):
    from models.errors import ModelUnavailable

    model = ScriptedChatModel()
    model.add(ModelUnavailable("down"), ModelUnavailable("down"), AssistantTurn(text="Back."))
    chat = chat_service(demo, store, model)
    sid = store.create_session(A)["id"]
    with pytest.raises(ModelUnavailable):
        asyncio.run(chat.send(A, sid, "How many?", message_id="m-3"))
    answer = asyncio.run(chat.send(A, sid, "How many?", message_id="m-3"))
    assert answer["content"] == "Back."
    assert [m["role"] for m in store.list_messages(A, sid)] == ["user", "assistant"]


def test_deleting_a_session_while_it_is_answered_is_404_not_500(demo, store, ha):
    model = ScriptedChatModel(latency_s=0.5)
    model.add(AssistantTurn(text="Too late."))
    app = create_app(demo.services(model, store=store))
    with TestClient(app, raise_server_exceptions=False) as client:
        sid = client.post(BASE, headers=ha).json()["id"]

        async def ask_and_delete():
            loop = asyncio.get_running_loop()
            ask = loop.run_in_executor(
                None,
                lambda: client.post(f"{BASE}/{sid}/messages", json={"content": "hi"}, headers=ha),
            )
            await asyncio.sleep(0.2)
            deleted = await loop.run_in_executor(
                None, lambda: client.delete(f"{BASE}/{sid}", headers=ha)
            )
            return await ask, deleted

        answer, deleted = asyncio.run(ask_and_delete())
    assert deleted.status_code == 204
    assert_error(answer, 404, "session_not_found")
    assert store.list_messages(A, sid) == []  # no orphan answer


def test_the_service_says_the_session_went_away(demo, store):
    model = ScriptedChatModel()
    model.add(lambda *a: (store.delete_session(A, sid), AssistantTurn(text="x"))[1])
    chat = chat_service(demo, store, model)
    sid = store.create_session(A)["id"]
    with pytest.raises(SessionNotFound):
        asyncio.run(chat.send(A, sid, "hi"))


@pytest.mark.faults
def test_a_long_answer_keeps_its_claim_alive(demo, store, monkeypatch):
    """A claim is renewed while its request answers: only a dead request's goes stale."""
    import crow.chat.service

    monkeypatch.setattr(crow.chat.service, "HEARTBEAT_S", 0.05)
    monkeypatch.setattr(crow.chat.service, "TAKEOVER_AFTER_S", 0.3)
    model = ScriptedChatModel(latency_s=1.0)  # longer than the takeover time
    model.add(AssistantTurn(text="Slow but once."))
    chat = chat_service(demo, store, model)
    sid = store.create_session(A)["id"]

    async def first_then_retry():
        first = asyncio.create_task(chat.send(A, sid, "How many?", message_id="m-4"))
        await asyncio.sleep(0.6)  # the first request's claim would be stale without renewal
        return await asyncio.gather(first, chat.send(A, sid, "How many?", message_id="m-4"))

    one, two = asyncio.run(first_then_retry())
    assert one["id"] == two["id"] and len(model.calls) == 1


def test_qna_answers_with_the_configured_model_timeout_and_token_cap(demo, store):
    from crow.chat.agent.config import AgentConfig

    model = ScriptedChatModel()
    model.add(AssistantTurn(text="Sixty days."))
    chat = demo.chat(model, store=store, config=AgentConfig(model_timeout_s=42.0, max_tokens=77))
    asyncio.run(chat.ask_kb(A, "Return window?"))
    params = model.calls[-1].params
    assert (params.timeout_s, params.max_tokens) == (42.0, 77)  # not a hard-coded 60 s
