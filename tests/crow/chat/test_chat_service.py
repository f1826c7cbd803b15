"""The chat service over a real chat store: the history the agent sees, what is stored and when."""

from __future__ import annotations

import asyncio

import pytest

from crow.chat.agent.config import AgentConfig
from crow.chat.agent.prompts import opening
from crow.chat.service import SessionNotFound
from crow.store.chat_store import ChatStore
from models.errors import ModelTimeout
from models.messages import AssistantTurn
from models.testing import ScriptedChatModel
from tests.agent_support import ORG, call
from tests.demo_env import build_demo_env


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


@pytest.fixture
def chat(demo, tmp_path):
    store = ChatStore(tmp_path / "chat.duckdb")
    model = ScriptedChatModel()
    service = demo.chat(model, store=store, config=AgentConfig())
    yield service, store, model
    store.close()


def test_context_is_the_last_ten_messages(demo, chat):
    service, store, model = chat
    session = store.create_session(ORG)
    for i in range(12):
        store.add_message(ORG, session["id"], "user" if i % 2 == 0 else "assistant", f"old {i}")
    model.add(AssistantTurn(text="Hello!"))
    asyncio.run(service.send(ORG, session["id"], "Hi!"))
    sent = model.calls[0].messages
    # the system prompt is the same text for every org (a prompt cache reuses it across
    # orgs); the org's name follows it in a message of its own
    [name] = [o["name"] for o in demo.lake.list_orgs() if o["id"] == ORG]
    assert list(sent[:2]) == opening(name)
    assert "CROW AI, an intelligent retail analytics assistant" in sent[0].content
    assert sent[0] == opening("Another Org")[0] and sent[1] != opening("Another Org")[1]
    assert [m.content for m in sent[2:]] == [f"old {i}" for i in range(2, 12)] + ["Hi!"]


def test_user_message_is_stored_before_the_model_and_survives_its_failure(chat):
    service, store, model = chat
    session = store.create_session(ORG)

    def check_stored(messages, tools, params):
        assert [m["content"] for m in store.list_messages(ORG, session["id"])] == [
            "How many interactions?"
        ]
        raise ModelTimeout("down")

    model.add(check_stored, ModelTimeout("still down"))
    with pytest.raises(ModelTimeout):
        asyncio.run(service.send(ORG, session["id"], "How many interactions?"))
    stored = store.list_messages(ORG, session["id"])
    assert [(m["role"], m["content"]) for m in stored] == [("user", "How many interactions?")]


def test_answer_is_stored_with_sources_steps_and_timings(chat):
    service, store, model = chat
    session = store.create_session(ORG)
    model.add(call("search_org_context", query="return policy"), AssistantTurn(text="60 days."))
    message = asyncio.run(service.send(ORG, session["id"], "What is our return policy?"))
    assert message["role"] == "assistant" and message["sources"][0]["type"] == "org_context"
    assert message["tool_steps"][0]["name"] == "search_org_context"
    # embedded once each: the query (the search) and the question (the sentence that answers it)
    assert message["timings"]["iterations"] == 2 and message["timings"]["embed_calls"] == 2
    assert store.get_session(ORG, session["id"])["title"] == "What is our return policy?"
    with pytest.raises(SessionNotFound):
        asyncio.run(service.send("fresh-mart", session["id"], "sneaky"))
