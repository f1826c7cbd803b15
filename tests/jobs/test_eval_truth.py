"""Answer correctness in the evaluation: truths from the org's data, and grading answers by them."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest

from crow.chat.agent.loop import Agent
from crow.chat.agent.sources import Source
from jobs import truth
from jobs.eval import EvalOrg, evaluate_question
from jobs.grading import load_questions, summarize
from models.messages import AssistantTurn, ToolCall
from models.testing import ScriptedChatModel
from tests.demo_env import build_demo_env
from tests.repo import ROOT

TRUTH_FILES = [
    ROOT / "benchmarks" / "truth_questions.jsonl",
    ROOT / "benchmarks" / "truth_blind.jsonl",
    ROOT / "benchmarks" / "truth_blind2.jsonl",
    ROOT / "benchmarks" / "truth_blind3.jsonl",
    ROOT / "benchmarks" / "truth_blind4.jsonl",
    ROOT / "benchmarks" / "truth_blind5.jsonl",
    ROOT / "benchmarks" / "truth_blind6.jsonl",
    ROOT / "benchmarks" / "truth_blind7.jsonl",
    ROOT / "benchmarks" / "truth_blind8.jsonl",
    ROOT / "benchmarks" / "truth_blind9.jsonl",
    ROOT / "benchmarks" / "truth_blind10.jsonl",
    ROOT / "benchmarks" / "truth_blind11.jsonl",
    ROOT / "benchmarks" / "truth_blind12.jsonl",
    ROOT / "benchmarks" / "truth_blind13.jsonl",
    ROOT / "benchmarks" / "truth_blind14.jsonl",
    ROOT / "benchmarks" / "truth_blind15.jsonl",
    ROOT / "benchmarks" / "truth_blind16.jsonl",
    ROOT / "benchmarks" / "truth_blind17.jsonl",
    ROOT / "benchmarks" / "truth_blind18.jsonl",
    ROOT / "benchmarks" / "truth_blind19.jsonl",
    ROOT / "benchmarks" / "truth_blind20.jsonl",
    ROOT / "benchmarks" / "truth_blind21.jsonl",
    ROOT / "benchmarks" / "truth_blind22.jsonl",
    ROOT / "benchmarks" / "truth_blind23.jsonl",
    ROOT / "benchmarks" / "truth_blind24.jsonl",
    ROOT / "benchmarks" / "truth_blind25.jsonl",
    ROOT / "benchmarks" / "truth_blind26.jsonl",
    ROOT / "benchmarks" / "truth_blind27.jsonl",
    ROOT / "benchmarks" / "truth_blind28.jsonl",
    ROOT / "benchmarks" / "truth_blind29.jsonl",
    ROOT / "benchmarks" / "truth_blind30.jsonl",
    ROOT / "benchmarks" / "truth_blind31.jsonl",
    ROOT / "benchmarks" / "truth_blind32.jsonl",
    ROOT / "benchmarks" / "truth_blind33.jsonl",
    ROOT / "benchmarks" / "truth_blind34.jsonl",
    ROOT / "benchmarks" / "truth_blind35.jsonl",
    ROOT / "benchmarks" / "truth_blind36.jsonl",
    ROOT / "benchmarks" / "truth_blind37.jsonl",
    ROOT / "benchmarks" / "truth_blind38.jsonl",
    ROOT / "benchmarks" / "truth_blind39.jsonl",
    ROOT / "benchmarks" / "truth_blind40.jsonl",
    ROOT / "benchmarks" / "truth_blind41.jsonl",
    ROOT / "benchmarks" / "truth_blind42.jsonl",
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


def answer(text: str, tools: tuple[str, ...] = (), sources: tuple[Source, ...] = ()):
    return SimpleNamespace(
        content=text, sources=list(sources), tool_steps=[{"name": t} for t in tools]
    )


@pytest.mark.parametrize("path", TRUTH_FILES, ids=lambda p: p.name)
def test_every_truth_of_the_sets_is_computable_and_names_something(demo, path):
    questions = load_questions(path)
    assert len({q["id"] for q in questions}) == len(questions)
    assert {q["org"] for q in questions} == {"acme-outdoor", "fresh-mart"}
    for q in questions:
        rows = truth.expected(q["truth"], demo.lake, q["org"])
        if "sql" in q["truth"]:
            assert rows and all(v is not None for row in rows for v in row), q["id"]


def test_a_windowed_truth_means_what_the_summary_tool_counts_for_the_same_words(demo):
    from crow.chat.agent.tools import TOOLS_BY_NAME

    sql = (
        "SELECT count(*) FROM interactions WHERE channel = 'web' "
        "AND occurred_at >= (SELECT t FROM anchor) - INTERVAL 7 DAY"
    )
    [[expected]] = truth.expected({"sql": sql}, demo.lake, "acme-outdoor")
    ctx = demo.tool_context("acme-outdoor")
    tool = TOOLS_BY_NAME["get_interaction_summary"]
    out = asyncio.run(tool.invoke({"channel": "web", "since": "last 7 days"}, ctx))
    assert 0 < expected == out.content["total_interactions"]


def test_numbers_are_stated_in_any_usual_writing_and_text_in_any_case():
    rows = [["web", 10068]]
    spec = {"sql": "-"}
    assert truth.judge(spec, rows, answer("The **Web** channel is busiest, with 10,068."))
    assert truth.judge(spec, rows, answer("web: 10068 interactions"))
    assert not truth.judge(spec, rows, answer("The web channel is busiest, with 10,086."))
    assert not truth.judge(spec, rows, answer("You had 10,068 interactions."))  # no channel
    assert truth.judge(spec, [[14.95]], answer("Expedited shipping is $14.95."))
    assert not truth.judge(spec, [[14.95]], answer("Expedited shipping is $14.9."))
    assert not truth.judge(spec, [], answer("Nothing."))


def test_all_rows_or_any_row():
    rows = [["Basecamp Daypack 3"], ["Cascade Dry Bag Eco"]]
    one = answer("The top product is the Basecamp Daypack 3.")
    assert not truth.judge({"sql": "-"}, rows, one)
    assert truth.judge({"sql": "-", "match": "any"}, rows, one)
    both = answer("1. Cascade dry bag eco\n2. Basecamp  Daypack 3")
    assert truth.judge({"sql": "-"}, rows, both)


def test_a_name_in_a_footnote_only_is_not_stated():
    top = [["Sunny Acres Orange Juice 2L"]]
    juice = Source(type="product", id="p1", title="Sunny Acres Orange Juice 2L")
    cited_only = answer(
        'Web had 6,991 interactions.\n\n[1] Product: "Sunny Acres Orange Juice 2L"',
        sources=(juice,),
    )
    assert not truth.judge({"sql": "-"}, top, cited_only)
    named = answer(
        'The top beverage is Sunny Acres Orange Juice 2L [1].\n\n[1] Product: "Sunny Acres '
        'Orange Juice 2L"',
        sources=(juice,),
    )
    assert truth.judge({"sql": "-"}, top, named)


def test_a_two_part_truth_needs_both_parts_stated():
    both = {"sql": "-", "match": "all", "facts": [["$75", "75 USD"]]}
    rows = [[1234]]
    assert truth.judge(both, rows, answer("1,234 web interactions; shipping is free over $75."))
    assert not truth.judge(both, rows, answer("You logged 1,234 web interactions."))
    assert not truth.judge(both, rows, answer("Standard shipping is free over $75."))


def test_facts_alternatives_citations_and_small_talk():
    facts = {"facts": [["30 days", "thirty days"], "unused"]}
    assert truth.judge(facts, None, answer("Kayaks must be returned unused within thirty days."))
    assert not truth.judge(facts, None, answer("Kayaks can be returned within 60 days."))
    social = Source(type="interaction", id="i1", title="Love this jacket", detail="social")
    web = Source(type="interaction", id="i2", title="Jacket page", detail="web")
    cites = {"cites": {"type": "interaction", "detail": "social"}}
    assert truth.judge(cites, None, answer("People love it [1].", sources=(social,)))
    assert not truth.judge(cites, None, answer("People viewed it [1].", sources=(web,)))
    hello = {"no_tools": True}
    assert truth.judge(hello, None, answer("Hello! How can I help?"))
    assert not truth.judge(
        hello, None, answer("You have 20,000 interactions.", ("get_interaction_summary",))
    )


def test_a_follow_up_is_asked_after_its_history_and_graded_on_its_own_answer(demo):
    """The earlier question is answered by the agent under test and stays in the chat."""
    env = EvalOrg(demo, "fresh-mart")
    [question] = [q for q in load_questions(TRUTH_FILES[1]) if q["id"] == "b26"]

    def count(messages, tools, params):
        return AssistantTurn(text=json.loads(messages[-1].content)["in_words"])

    def summary(**arguments) -> AssistantTurn:
        call = ToolCall(id="c", name="get_interaction_summary", arguments=arguments)
        return AssistantTurn(tool_calls=(call,))

    web, month = summary(channel="web"), summary(channel="web", since="last 30 days")
    model = ScriptedChatModel([web, count, month, count])
    row = asyncio.run(evaluate_question(Agent(model).run, question, env))
    follow_up = [m.content for m in model.calls[2].messages if m.role in ("user", "assistant")]
    assert (
        follow_up[0] == question["history"][0] and "interactions on the web channel" in follow_up[1]
    )
    assert follow_up[-1] == question["query"]
    assert row["correct"] is True and row["tools_ok"] is True and row["grounded"] is True

    def again(messages, tools, params):  # after the correction, the same answer again
        assert messages[-1].role == "user" and messages[-2].role == "tool"  # no draft shown
        return AssistantTurn(text=json.loads(messages[-2].content)["in_words"])

    # the follow-up forgot the window; its repeat of the earlier answer is corrected once, in vain
    model = ScriptedChatModel([web, count, web, count, again])
    row = asyncio.run(evaluate_question(Agent(model).run, question, env))
    assert row["correct"] is False
    summary = summarize([row, {**row, "correct": True}, {**row, "correct": None}])
    assert summary["all"]["correctness"] == 0.5 and summary["all"]["composed_rate"] == 0.0
