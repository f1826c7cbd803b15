"""The pydantic-ai peer over the OpenAI-compatible server, with the scripted model and real tools."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from benchmarks.agent_compare import compare, markdown_table, text_table
from benchmarks.peer import PeerAgent, PeerConfig, serve_model
from crow.chat.agent.loop import Agent
from crow.chat.agent.prompts import opening
from crow.chat.agent.tools import TOOLS
from jobs.eval import EvalOrg, evaluate_question
from models.errors import PromptTooLong
from models.messages import AssistantTurn, InvalidToolCall, Message, ModelParams, ToolCall
from models.testing import ScriptedChatModel
from tests.demo_env import build_demo_env

ORG = "acme-outdoor"
CONFIG = PeerConfig(model_timeout_s=10, tool_timeout_s=5)
COUNT = {
    "id": "c",
    "kind": "count",
    "query": "How many interactions do we have?",
    "expect_tools": ["get_interaction_summary"],
}
TENTS = {
    "id": "s",
    "kind": "search",
    "query": "Find dome tents",
    "expect_tools": ["search_products"],
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


@pytest.fixture
def env(demo) -> EvalOrg:
    return EvalOrg(demo, ORG)


def call(name: str, **arguments) -> AssistantTurn:
    return AssistantTurn(
        tool_calls=(ToolCall(id="c1", name=name, arguments=arguments),), finish_reason="tool_calls"
    )


def answer_from_tool_result(messages, tools, params) -> AssistantTurn:
    result = json.loads(messages[-1].content)
    if "total_interactions" in result:
        return AssistantTurn(text=f"You have {result['total_interactions']:,} interactions.")
    [rows] = [v for v in result.values() if isinstance(v, list)]
    return AssistantTurn(text=f"Try the {rows[0].get('title', '')}.")


def ask_peer(model: ScriptedChatModel, question: dict, env: EvalOrg) -> dict:
    with serve_model(model, CONFIG) as base_url:
        return asyncio.run(evaluate_question(PeerAgent(base_url, CONFIG).run, question, env))


def test_the_peer_calls_the_tool_and_answers_from_its_result(demo, env):
    model = ScriptedChatModel([call("get_interaction_summary"), answer_from_tool_result])
    row = ask_peer(model, COUNT, env)
    model.assert_complete()
    first, second = model.calls
    # The model sees what Ask CROW's loop sends it: the prompt, the tools, greedy decoding.
    instructions = "\n\n".join(m.content for m in opening("Acme Outdoor"))
    assert first.messages[0] == Message.system(instructions)
    assert first.messages[1] == Message.user(COUNT["query"])
    assert first.tools == tuple(t.spec for t in TOOLS)
    assert (first.params.temperature, first.params.max_tokens) == (0.0, 512)
    tool_message = second.messages[-1]
    assert tool_message.role == "tool" and '"total_interactions": 3000' in tool_message.content
    assert row["answer"] == "You have 3,000 interactions."
    assert row["called"] == ["get_interaction_summary"] and row["tools_ok"] and row["grounded"]
    assert row["error"] is None and row["fallback"] is None


def test_a_wrong_tool_is_graded_a_miss_and_sources_are_the_tools_rows(env):
    model = ScriptedChatModel([call("search_products", query="dome tent"), answer_from_tool_result])
    row = ask_peer(model, {**TENTS, "expect_tools": ["search_patterns"]}, env)
    assert row["called"] == ["search_products"] and not row["tools_ok"]
    assert row["answer"].startswith("Try the ") and row["footnotes"] == 0


def test_a_malformed_tool_call_is_an_error_row_not_a_crash(env):
    bad = AssistantTurn(
        invalid_tool_calls=(
            InvalidToolCall(
                id="x",
                name="search_products",
                raw='{"name": "search_products", "arguments": {"query": "tent", "limit": 99}}',
                reason="limit: 99 > 20",
            ),
        ),
        finish_reason="tool_calls",
    )
    model = ScriptedChatModel([bad] * CONFIG.max_requests)
    greeting = {"id": "g", "kind": "greeting", "query": "Hi!", "expect_tools": []}
    row = ask_peer(model, greeting, env)
    retry = model.calls[1].messages[-1]  # the server passed the call on; the tool rejected it
    assert retry.role == "tool" and "less than or equal to 20" in retry.content
    assert row["called"] == [] and row["error"] and not row["tools_ok"]  # no tool run, yet a miss


def respond(messages, tools, params) -> AssistantTurn:
    """A scripted model for any loop: calls the tool the question needs, then answers from it."""
    if messages[-1].role == "tool":
        return answer_from_tool_result(messages, tools, params)
    if not tools or params.tool_choice == "none":
        return AssistantTurn(text="Hello!")
    question = next(m.content for m in reversed(messages) if m.role == "user")
    if question.startswith("How many"):
        return call("get_interaction_summary")
    return call("search_products", query="dome tent")


def test_compare_asks_both_agents_each_question_and_tabulates(demo):
    model = ScriptedChatModel([respond] * 20)
    result = asyncio.run(
        compare(
            model,
            [COUNT, TENTS],
            demo,
            ORG,
            progress=False,
            baseline=True,
        )
    )
    assert result["agents"] == ["askcrow", "peer", "baseline"]
    assert [r["id"] for r in result["askcrow"]["rows"]] == ["c", "s"]  # its own tests test it
    # the baseline is the plain loop: the scripted model's own choice, no router
    assert [r["called"] for r in result["baseline"]["rows"]] == [
        ["get_interaction_summary"],
        ["search_products"],
    ]
    peer = result["peer"]["rows"]
    assert [r["called"] for r in peer] == [["get_interaction_summary"], ["search_products"]]
    assert result["peer"]["summary"]["all"]["tool_accuracy"] == 1.0
    assert peer[1]["footnotes"] == 0  # the peer writes no footnotes
    assert result["peer"]["rows"][0]["requests"] == 2
    assert [c["name"] for c in result["peer"]["rows"][0]["trace"][0]["calls"]] == [
        "get_interaction_summary"
    ]
    assert "3,000" in result["peer"]["rows"][0]["answer"]
    table = markdown_table(result)
    assert "| count | 1 | " in table and " / 1.00 / 1.00 |" in table and "| all | 2 |" in table
    assert "pydantic-ai" in text_table(result) and "hints off" in text_table(result)


def test_the_model_gets_the_peer_limits(env):
    model = ScriptedChatModel([AssistantTurn(text="Hello!")])
    with serve_model(model, CONFIG) as base_url:
        answer = asyncio.run(PeerAgent(base_url, CONFIG).run([Message.user("Hi")], env.context()))
    assert answer.content == "Hello!" and answer.requests == 1 and answer.tool_steps == []
    assert answer.trace == [{"finish_reason": "stop", "text": "Hello!", "calls": []}]
    assert model.calls[0].params == ModelParams(max_tokens=512, timeout_s=CONFIG.model_timeout_s)


def test_an_agent_that_does_not_answer_in_time_is_graded_no_answer(demo):
    from jobs.eval import evaluate_question

    env = EvalOrg(demo, ORG, 0.2)

    async def stuck(messages, ctx):
        await asyncio.sleep(5)

    row = asyncio.run(evaluate_question(stuck, COUNT, env))
    assert row["tools_ok"] is False and row["grounded"] is False
    assert row["error"] == "no answer within 0.2s" and row["latency_s"] < 2


def test_an_agent_whose_model_fails_is_graded_no_answer_and_the_run_goes_on(demo):
    """blind26's first run ended at its eleventh question on a PromptTooLong the agent
    raised: a model's error is that question's miss."""
    refused = ScriptedChatModel([PromptTooLong("over the budget")] * 3)
    row = asyncio.run(evaluate_question(Agent(refused).run, COUNT, EvalOrg(demo, ORG)))
    assert row["error"] == "PromptTooLong: over the budget" and not row["tools_ok"]


def test_a_count_for_the_asked_filters_is_graded_grounded(demo, env):
    from jobs.eval import evaluate_question

    question = {
        "id": "w",
        "kind": "count",
        "query": "How many web interactions last week?",
        "expect_tools": ["get_interaction_summary"],
    }
    week = demo.analytics.interaction_summary(ORG, channel="web")  # not the figure asked for
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="web", since="last week"),
            lambda messages, tools, params: AssistantTurn(
                text=f"{json.loads(messages[-1].content)['total_interactions']} web interactions."
            ),
        ]
    )
    row = asyncio.run(evaluate_question(Agent(model).run, question, env))
    assert row["grounded"] is True and str(week["by_channel"]["web"]) not in row["answer"]
    step = {
        "name": "get_interaction_summary",
        "ok": True,
        "arguments": {"channel": "web", "since": "last week"},
    }

    async def wrong(messages, ctx):
        return SimpleNamespace(
            content="You had 987654 web interactions.",
            tool_steps=[step],
            sources=[],
            fallback=None,
            timings={},
        )

    assert asyncio.run(evaluate_question(wrong, question, env))["grounded"] is False


def test_compare_records_agents_that_run_out_of_time(demo):
    model = ScriptedChatModel([respond] * 10, latency_s=1.0)
    result = asyncio.run(
        compare(
            model,
            [COUNT],
            demo,
            ORG,
            progress=False,
            answer_timeout_s=0.3,
        )
    )
    for name in ("askcrow", "peer"):
        (row,) = result[name]["rows"]
        assert row["error"] == "no answer within 0.3s" and not row["tools_ok"]
