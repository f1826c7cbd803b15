"""A2A and MCP over a real HTTP server: a2a-sdk and mcp clients, scripted model, demo data."""

from __future__ import annotations

import asyncio
import json
import time
from typing import NamedTuple

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.helpers import get_artifact_text
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from crow.api.app import create_app
from crow.store.chat_store import ChatStore
from models.errors import ModelUnavailable
from models.messages import AssistantTurn, ToolCall
from models.testing import ScriptedChatModel, serve_in_thread
from tests.conftest import MCP_ACCEPT, MCP_INITIALIZE, assert_error, key_headers
from tests.demo_env import build_demo_env

A, B = "acme-outdoor", "fresh-mart"
NO_DATA = "zz-none"  # an org with a key but no data
BAD_KEY = {"Authorization": "Bearer crow_not-a-real-key"}
SKILLS = {"product-search", "interaction-analysis", "pattern-insights", "org-context"}
TOOL_NAMES = {
    "get_interaction_summary",
    "search_products",
    "search_interactions",
    "search_patterns",
    "search_org_context",
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


class Served(NamedTuple):
    base: str
    model: ScriptedChatModel
    store: ChatStore
    ha: dict[str, str]  # an editor key of A (Authorization and X-Organization-Id)
    hb: dict[str, str]  # the same for B
    h_none: dict[str, str]  # a key of an org without data


@pytest.fixture
def served(demo, tmp_path):
    store = ChatStore(tmp_path / "chat.duckdb")
    model = ScriptedChatModel()
    services = demo.services(model, store=store)
    keys = {org: key_headers(store, org) for org in (A, B, NO_DATA)}  # before the app runs
    with serve_in_thread(create_app(services), lifespan=True) as base:
        yield Served(base, model, store, keys[A], keys[B], keys[NO_DATA])
    store.close()


def only_key(headers: dict[str, str]) -> dict[str, str]:
    """Just the Authorization header: the org is the key's."""
    return {"Authorization": headers["Authorization"]}


def assert_unauthorized(response: httpx.Response, code: str = "unauthorized") -> None:
    assert_error(response, 401, code)
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def count_then_answer(model: ScriptedChatModel) -> None:
    """One tool call, then an answer quoting the tool's total and its web count."""

    def answer(messages, tools, params) -> AssistantTurn:
        summary = json.loads(messages[-1].content)
        web = summary["by_channel"]["web"]
        return AssistantTurn(
            text=f"You have {summary['total_interactions']} interactions, {web} web."
        )

    model.add(
        AssistantTurn(
            tool_calls=(ToolCall(id="c1", name="get_interaction_summary", arguments={}),)
        ),
        answer,
    )


def user_message(text: str, context_id: str = "") -> SendMessageRequest:
    msg = Message(
        role=Role.ROLE_USER, message_id=f"m-{time.monotonic_ns()}", parts=[Part(text=text)]
    )
    if context_id:
        msg.context_id = context_id
    return SendMessageRequest(message=msg)


async def a2a_send(base: str, headers: dict, request: SendMessageRequest) -> list[StreamResponse]:
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        client = await ClientFactory(
            ClientConfig(httpx_client=http, streaming=False)
        ).create_from_url(base)
        return [event async for event in client.send_message(request)]


def test_agent_card_is_served_at_both_well_known_paths(served):
    base = served.base
    cards = [
        httpx.get(base + path).json()  # public: no key
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json")
    ]
    assert cards[0] == cards[1]
    card = cards[0]
    assert card["name"] == "Ask CROW"
    assert {s["id"] for s in card["skills"]} == SKILLS
    assert all(s["description"] and 2 <= len(s["examples"]) <= 3 for s in card["skills"])
    assert card["supportedInterfaces"][0] == {
        "url": f"{base}/a2a",
        "protocolBinding": "JSONRPC",
        "protocolVersion": "1.0",
    }
    assert card["url"] == f"{base}/a2a"  # 0.3 clients read the legacy fields
    # The card declares the bearer scheme the JSON-RPC endpoint requires (1.0 and 0.3 fields).
    schemes = card["securitySchemes"]
    bearer = [
        name
        for name, s in schemes.items()
        if s.get("httpAuthSecurityScheme", {}).get("scheme", "").lower() == "bearer"
    ]
    assert bearer, schemes
    (name,) = bearer
    assert schemes[name]["type"] == "http" and schemes[name]["scheme"].lower() == "bearer"
    assert {name} == {n for req in card["securityRequirements"] for n in req["schemes"]}
    assert card["security"] == [{name: []}]


def test_a2a_and_mcp_need_a_key(served):
    base = served.base
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "t"}}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    assert_unauthorized(httpx.post(f"{base}/a2a", json=rpc, headers={"A2A-Version": "1.0"}))
    assert_unauthorized(httpx.post(f"{base}/a2a", json=rpc, headers={"X-Organization-Id": A}))
    assert_unauthorized(httpx.post(f"{base}/mcp", json=init, headers=accept))
    assert_unauthorized(
        httpx.post(f"{base}/mcp", json=init, headers={**accept, **BAD_KEY}), "invalid_key"
    )
    assert_unauthorized(httpx.post(f"{base}/a2a", json=rpc, headers=BAD_KEY), "invalid_key")
    revoked = served.store.create_api_key(A, "editor")
    served.store.revoke_api_key(revoked["id"])
    assert_unauthorized(
        httpx.post(f"{base}/a2a", json=rpc, headers={"Authorization": f"Bearer {revoked['key']}"}),
        "invalid_key",
    )


def test_a2a_sdk_client_sends_a_message_and_gets_a_completed_task(served, demo):
    base, model, store, HA = served.base, served.model, served.store, only_key(served.ha)
    web = demo.analytics.interaction_summary(A)["by_channel"]["web"]
    count_then_answer(model)
    events = asyncio.run(a2a_send(base, HA, user_message("How many interactions do we have?")))
    assert len(events) == 1 and events[0].HasField("task")
    task = events[0].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_artifact_text(task.artifacts[0]) == f"You have 3000 interactions, {web} web."
    meta = MessageToDict(task.artifacts[0].metadata)
    sessions, total = store.list_sessions(A)
    assert total == 1 and meta["chat_session_id"] == sessions[0]["id"]
    assert [m["role"] for m in store.list_messages(A, sessions[0]["id"])] == ["user", "assistant"]
    model.assert_complete()

    async def same_context_then_get_task() -> tuple[list[StreamResponse], dict]:
        events = await a2a_send(base, HA, user_message("And again?", task.context_id))
        async with httpx.AsyncClient(headers=HA, timeout=30) as http:
            client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(base)
            got = await client.get_task(GetTaskRequest(id=task.id))
        return events, MessageToDict(got)

    model.add(AssistantTurn(text="Still the same total."))
    again, got = asyncio.run(same_context_then_get_task())
    assert again[0].task.context_id == task.context_id
    assert store.list_sessions(A)[1] == 1  # the same context continues the same chat session
    assert got["id"] == task.id and got["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a2a_org_scoping_and_model_failure(served, demo):
    base, model, store, HA, HB = served.base, served.model, served.store, served.ha, served.hb
    count_then_answer(model)
    events = asyncio.run(a2a_send(base, HB, user_message("How many interactions?")))
    b = demo.analytics.interaction_summary(B)
    assert get_artifact_text(events[0].task.artifacts[0]) == (
        f"You have {b['total']} interactions, {b['by_channel']['web']} web."
    )
    assert store.list_sessions(B)[1] == 1 and store.list_sessions(A)[1] == 0
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": events[0].task.id}}
    other = httpx.post(f"{base}/a2a", json=rpc, headers={**HA, "A2A-Version": "1.0"}).json()
    assert other["error"]["code"] == -32001  # B's task is not found for A
    assert_unauthorized(httpx.post(f"{base}/a2a", json=rpc))
    bad_key_of_a = {**BAD_KEY, "X-Organization-Id": A}
    assert_unauthorized(httpx.post(f"{base}/a2a", json=rpc, headers=bad_key_of_a), "invalid_key")
    # A's key naming B: refused, not answered for either org.
    assert_error(
        httpx.post(f"{base}/a2a", json=rpc, headers={**HA, "X-Organization-Id": B}),
        403,
        "wrong_organization",
    )
    assert_error(
        httpx.post(f"{base}/a2a", json=rpc, headers=served.h_none), 404, "organization_not_found"
    )
    model.add(ModelUnavailable("down"), ModelUnavailable("still down"))
    failed = asyncio.run(a2a_send(base, HA, user_message("How many?"))).pop().task
    assert failed.status.state == TaskState.TASK_STATE_FAILED
    assert "could not answer" in failed.status.message.parts[0].text


def test_a2a_v03_message_send_is_understood(served):
    base, model, HA = served.base, served.model, served.ha
    model.add(AssistantTurn(text="Hello from CROW."))
    body = {
        "jsonrpc": "2.0",
        "id": "x",
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "messageId": "m1",
                "parts": [{"kind": "text", "text": "hi"}],
            }
        },
    }
    result = httpx.post(f"{base}/a2a", json=body, headers=HA).json()["result"]
    assert result["status"]["state"] == "completed"
    assert result["artifacts"][0]["parts"][0]["text"] == "Hello from CROW."


async def mcp_session_calls(base: str, headers: dict) -> tuple[set[str], dict, dict]:
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{base}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        tools = await session.list_tools()
        schemas = {t.name: t.input_schema for t in tools.tools}
        result = await session.call_tool("get_interaction_summary", {})
        assert not result.is_error and init.server_info.name == "ask-crow"
        bad = await session.call_tool("search_products", {"limit": 99})
        assert bad.is_error
        return set(schemas), schemas, json.loads(result.content[0].text)


def test_mcp_client_lists_and_calls_tools_for_the_key_org(served, demo):
    base = served.base
    # The key alone names the org (no X-Organization-Id): A's data, and only A's.
    names, schemas, summary_a = asyncio.run(mcp_session_calls(base, only_key(served.ha)))
    assert names == TOOL_NAMES
    from crow.chat.agent.tools import TOOLS_BY_NAME

    assert schemas["search_products"] == TOOLS_BY_NAME["search_products"].spec.parameters
    a, b = demo.analytics.interaction_summary(A), demo.analytics.interaction_summary(B)
    assert summary_a["total_interactions"] == 3000 and summary_a["sources"] == []
    assert (
        summary_a["total_interactions"] == a["total"] and summary_a["by_channel"] == a["by_channel"]
    )
    assert a["by_channel"] != b["by_channel"]  # the orgs' data differ, so A's answer is A's
    _, _, summary_b = asyncio.run(mcp_session_calls(base, served.hb))
    assert (
        summary_b["total_interactions"] == b["total"] and summary_b["by_channel"] == b["by_channel"]
    )
    assert summary_b["by_channel"] != summary_a["by_channel"]


def test_mcp_refuses_missing_and_bad_keys_and_other_orgs(served):
    base = served.base
    init, accept = MCP_INITIALIZE, MCP_ACCEPT
    assert_unauthorized(httpx.post(f"{base}/mcp", json=init, headers=accept))
    assert_unauthorized(
        httpx.post(f"{base}/mcp", json=init, headers={**accept, "X-Organization-Id": A})
    )
    assert_unauthorized(
        httpx.post(f"{base}/mcp", json=init, headers={**accept, **BAD_KEY}), "invalid_key"
    )
    a_naming_b = {**accept, **served.ha, "X-Organization-Id": B}
    assert_error(
        httpx.post(f"{base}/mcp", json=init, headers=a_naming_b), 403, "wrong_organization"
    )
    assert_error(
        httpx.post(f"{base}/mcp", json=init, headers={**accept, **served.h_none}),
        404,
        "organization_not_found",
    )
    ok = httpx.post(f"{base}/mcp", json=init, headers={**accept, **served.ha})
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "ask-crow"
    # DNS-rebinding protection: a key is not enough from a foreign Host or browser Origin.
    keyed = {**accept, **served.ha}
    foreign_host = httpx.post(f"{base}/mcp", json=init, headers={**keyed, "Host": "evil.example"})
    assert foreign_host.status_code == 421
    evil_origin = {**keyed, "Origin": "http://evil.example"}
    assert httpx.post(f"{base}/mcp", json=init, headers=evil_origin).status_code == 403


def legacy(base: str, body: dict, headers: dict | None) -> httpx.Response:
    return httpx.post(f"{base}/a2a/tasks/send", json=body, headers=headers or {}, timeout=30)


def tasks_send(task_id: str, text: str, **params) -> dict:
    message = {"role": "user", "parts": [{"type": "text", "text": text}]}
    return {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tasks/send",
        "params": {"id": task_id, "message": message, **params},
    }


def test_legacy_tasks_send(served, demo):
    base, model, store, HA = served.base, served.model, served.store, served.ha
    web = demo.analytics.interaction_summary(A)["by_channel"]["web"]
    count_then_answer(model)
    r = legacy(base, tasks_send("t-1", "How many interactions?", sessionId="client-s1"), HA)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 7
    task = body["result"]
    assert task["id"] == "t-1" and task["sessionId"] == "client-s1"
    assert task["status"]["state"] == "completed" and task["status"]["timestamp"].endswith("Z")
    assert task["artifacts"][0]["parts"] == [
        {"type": "text", "text": f"You have 3000 interactions, {web} web."}
    ]
    assert task["artifacts"][0]["metadata"]["sources"] == []
    model.add(AssistantTurn(text="Yes."))
    legacy(base, tasks_send("t-2", "Sure?", sessionId="client-s1"), HA)
    sessions, total = store.list_sessions(A)
    assert total == 1 and sessions[0]["message_count"] == 4  # one session for the client's id
    model.add(AssistantTurn(text="A fresh one."))
    fresh = legacy(base, tasks_send("t-3", "New topic"), HA).json()["result"]
    assert fresh["sessionId"].startswith("ses_") and store.list_sessions(A)[1] == 2
    model.add(ModelUnavailable("down"), ModelUnavailable("down"))
    failed = legacy(base, tasks_send("t-4", "How many?"), HA).json()["result"]
    assert failed["status"]["state"] == "failed" and failed["status"]["message"]["parts"][0]["text"]


def test_legacy_tasks_send_errors(served):
    base, HA = served.base, served.ha
    assert_unauthorized(legacy(base, tasks_send("t", "hi"), headers=None))
    assert_unauthorized(legacy(base, tasks_send("t", "hi"), headers={"X-Organization-Id": A}))
    assert_unauthorized(legacy(base, tasks_send("t", "hi"), headers=BAD_KEY), "invalid_key")
    assert_error(
        legacy(base, tasks_send("t", "hi"), headers={**HA, "X-Organization-Id": B}),
        403,
        "wrong_organization",
    )
    assert_error(
        legacy(base, tasks_send("t", "hi"), headers=served.h_none), 404, "organization_not_found"
    )
    unknown = legacy(base, {**tasks_send("t", "hi"), "method": "tasks/frobnicate"}, HA)
    assert unknown.status_code == 200
    assert unknown.json() == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32601, "message": "method not found: tasks/frobnicate"},
    }
    for params in ({"message": {"role": "user", "parts": []}}, {"id": "t"}, None):
        bad = legacy(
            base, {"jsonrpc": "2.0", "id": 8, "method": "tasks/send", "params": params}, HA
        )
        assert bad.status_code == 200 and bad.json()["error"]["code"] == -32602
    blank = legacy(base, tasks_send("t", "   "), HA).json()
    assert blank["error"]["code"] == -32602
    not_json = httpx.post(f"{base}/a2a/tasks/send", content=b"{", headers=HA)
    assert not_json.json()["error"]["code"] == -32700
