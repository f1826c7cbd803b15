"""The agent loop with the scripted model over real tools (hash embedder, real FAISS, DuckDB):
footnotes, parallel and failing tools, the iteration cap, fallbacks, streaming."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from crow.chat.agent.config import AgentConfig
from crow.chat.agent.loop import Agent
from crow.services import ThreadProxy
from models.errors import ModelTimeout, PromptTooLong
from models.messages import AssistantTurn, InvalidToolCall, Message, ToolCall
from models.testing import ScriptedChatModel
from tests.agent_support import call, ctx_for, run
from tests.demo_env import build_demo_env


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


def test_count_question_uses_the_summary_and_gets_no_footnotes(demo):
    model = ScriptedChatModel(
        [call("get_interaction_summary"), AssistantTurn(text="You have 3,000 interactions.")]
    )
    answer = run(Agent(model), ctx_for(demo))
    model.assert_complete()
    tool_msg = model.calls[1].messages[-1]
    assert tool_msg.role == "tool" and '"total_interactions": 3000' in tool_msg.content
    assert answer.content == "You have 3,000 interactions." and answer.sources == []
    assert answer.iterations == 2 and answer.fallback is None


def cite_the_first_of_each(messages, tools, params) -> AssistantTurn:
    """An answer naming the first result of each tool by its id, and an invented product."""
    ids = []
    for m in messages:
        if m.role == "tool":
            rows = next(v for v in json.loads(m.content).values() if isinstance(v, list))
            ids.append(rows[0]["id"])
    return AssistantTurn(
        text=f"Here is what I found: {', '.join(ids)}. See the Imaginary Tent 9000."
    )


def test_footnotes_are_numbered_typed_and_only_from_returned_sources(demo):
    model = ScriptedChatModel(
        [
            AssistantTurn(
                tool_calls=(
                    ToolCall(
                        id="a", name="search_products", arguments={"query": "dome tent", "limit": 2}
                    ),
                    ToolCall(
                        id="b", name="search_patterns", arguments={"query": "trend", "limit": 6}
                    ),
                    ToolCall(
                        id="c",
                        name="search_interactions",
                        arguments={"query": "queue", "channel": "cctv", "limit": 1},
                    ),
                    ToolCall(
                        id="d",
                        name="search_org_context",
                        arguments={"query": "target market", "limit": 3},
                    ),
                )
            ),
            cite_the_first_of_each,
        ]
    )
    answer = run(Agent(model), ctx_for(demo))
    notes = answer.content.split("\n\n")[-1].splitlines()
    assert [n[:4] for n in notes] == ["[1] ", "[2] ", "[3] ", "[4] "]
    assert re.fullmatch(r'\[1\] Product: ".+"', notes[0])
    assert re.fullmatch(
        r'\[2\] Pattern: ".+" \((trend|anomaly|segment|seasonal|churn-risk|affinity)\)', notes[1]
    )
    assert re.fullmatch(r"\[3\] Interaction #int-\d{7} \(cctv\)", notes[2])
    assert re.fullmatch(r'\[4\] Org context: ".+" \(\w+\)', notes[3])
    assert "Imaginary Tent 9000" not in "\n".join(notes)  # never an invented source
    returned = {(s["type"]) for s in [src.model_dump() for src in answer.sources]}
    assert returned == {"product", "pattern", "interaction", "org_context"}


def test_footnotes_keep_only_the_sources_the_answer_names(demo):
    def answer_naming_the_second(messages, tools, params):
        import json

        products = json.loads(messages[-1].content)["products"]
        return AssistantTurn(text=f"The best match is {products[1]['title']}.")

    model = ScriptedChatModel(
        [call("search_products", query="dome tent", limit=3), answer_naming_the_second]
    )
    answer = run(Agent(model), ctx_for(demo))
    assert len(answer.sources) == 1 and answer.content.endswith(
        f'[1] Product: "{answer.sources[0].title}"'
    )


def test_tool_calls_of_one_iteration_run_in_parallel(demo):
    class Slow:
        def __init__(self, inner):
            self.inner = inner

        async def search(self, *args, **kwargs):
            await asyncio.sleep(0.6)
            return await self.inner.search(*args, **kwargs)

    model = ScriptedChatModel(
        [
            AssistantTurn(
                tool_calls=(
                    ToolCall(id="a", name="search_patterns", arguments={"query": "trend"}),
                    ToolCall(id="b", name="search_org_context", arguments={"query": "returns"}),
                )
            ),
            AssistantTurn(text="done"),
        ]
    )
    started = time.perf_counter()
    answer = run(Agent(model), ctx_for(demo, retriever=Slow(ThreadProxy(demo.search))))
    assert time.perf_counter() - started < 1.1  # two 0.6 s tools, not 1.2 s
    assert [s["ok"] for s in answer.tool_steps] == [True, True]


def test_failing_and_slow_tools_become_error_results_for_the_model(demo):
    class Broken:
        async def search(self, *args, **kwargs):
            raise RuntimeError("index on fire")

        async def product_categories(self, *args, **kwargs):
            raise RuntimeError("index on fire")

    class Stuck:
        async def interaction_summary(self, *args, **kwargs):
            await asyncio.sleep(5)

        async def data_time_range(self, org_id):
            return None, None

    model = ScriptedChatModel(
        [
            AssistantTurn(
                tool_calls=(
                    ToolCall(id="a", name="search_products", arguments={"query": "tent"}),
                    ToolCall(id="b", name="get_interaction_summary", arguments={}),
                )
            ),
            AssistantTurn(text="Sorry, the data is not available right now."),
        ]
    )
    agent = Agent(model, AgentConfig(tool_timeout_s=0.3))
    answer = run(agent, ctx_for(demo, retriever=Broken(), analytics=Stuck()))
    results = [m.content for m in model.calls[1].messages if m.role == "tool"]
    assert "index on fire" in results[0] and "longer than 0.3s" in results[1]
    assert [s["ok"] for s in answer.tool_steps] == [False, False] and answer.sources == []


def test_iteration_cap_falls_back_to_one_plain_call(demo):
    turns = [call("search_interactions", cid=f"c{i}", query=f"trend {i}") for i in range(5)]
    model = ScriptedChatModel([*turns, AssistantTurn(text="Plain answer.")])
    answer = run(Agent(model), ctx_for(demo))
    model.assert_complete()
    assert answer.fallback == "max_iterations" and answer.content.startswith("Plain answer.")
    assert [c.params.tool_choice != "none" for c in model.calls] == [True] * 5 + [False]
    assert model.calls[-1].params.tool_choice == "none"


def test_a_model_failure_falls_back_and_invalid_calls_get_a_retry_message(demo):
    bad = AssistantTurn(
        invalid_tool_calls=(
            InvalidToolCall(id="x", name="search_products", raw="{}", reason="limit must be <= 20"),
        )
    )
    model = ScriptedChatModel([bad, ModelTimeout("slow"), AssistantTurn(text="Fallback answer.")])
    answer = run(Agent(model), ctx_for(demo))
    assert "limit must be <= 20" in model.calls[1].messages[-1].content
    assert answer.fallback == "error: ModelTimeout" and answer.content == "Fallback answer."


def test_results_past_the_prompt_budget_are_answered_composed_not_with_an_error(demo):
    """blind26: after a product ranking, the step and the plain call were both refused as
    over the local model's prompt budget, and the question had no answer. The plain call is
    tried again without the tools' specs; refused still, the answer is composed from the
    results and says so; with no results, the error stands."""
    too_long = PromptTooLong("the prompt has 3591 tokens, over the budget of 3072")
    ranked = call("search_products", query="", sort="popularity")
    model = ScriptedChatModel([ranked, too_long, too_long, too_long])
    answer = run(Agent(model), ctx_for(demo), "our 3 most popular products?")
    model.assert_complete()
    assert [len(c.tools) for c in model.calls[2:]] == [5, 0]
    assert answer.fallback == "composed"
    assert answer.tool_steps[0]["ok"] and answer.sources
    assert answer.sources[0].title in answer.content
    fits = ScriptedChatModel([ranked, too_long, too_long, AssistantTurn(text="Short.")])
    short = run(Agent(fits), ctx_for(demo), "top 3?")
    assert short.content.startswith("Short.") and short.fallback == "error: PromptTooLong"
    refused = ScriptedChatModel([too_long, too_long, too_long])
    with pytest.raises(PromptTooLong):
        run(Agent(refused), ctx_for(demo), "hi")


def test_the_same_query_text_is_embedded_once(demo):
    class Counting:
        def __init__(self):
            self.texts = []

        async def embed(self, texts):
            self.texts.extend(texts)
            return demo.embedder.embed(texts)

    counting = Counting()
    model = ScriptedChatModel(
        [
            AssistantTurn(
                tool_calls=(
                    ToolCall(id="a", name="search_products", arguments={"query": "Rain jacket"}),
                    ToolCall(
                        id="b", name="search_interactions", arguments={"query": "rain  jacket"}
                    ),
                )
            ),
            call("search_patterns", cid="c", query="rain jacket"),
            AssistantTurn(text="ok"),
        ]
    )
    run(Agent(model), ctx_for(demo, embedder=counting))
    # the three queries once; the patterns' own texts are embedded to pick the one the
    # question asks about (in_words.patterns_in_words)
    queries = [t for t in counting.texts if "".join(t.lower().split()) == "rainjacket"]
    assert queries == ["rain jacket"]


def test_no_tool_runs_that_the_model_did_not_call(demo):
    """With the small-model hints on, a count question the model answers without tools
    runs no tool: the hint is a line the model reads, not a call made for it. Answered
    without the tools the hint named, the model is asked once more with a call required,
    and what it calls, if anything, is still its own choice."""
    model = ScriptedChatModel(
        [
            AssistantTurn(text="Hello! Ask me about your data."),
            AssistantTurn(text="Hello again! Ask me about your data."),
        ]
    )
    agent = Agent(model, AgentConfig(hints=True))
    answer = run(agent, ctx_for(demo), "How many interactions do we have?")
    model.assert_complete()
    assert answer.tool_steps == [] and answer.sources == []
    first, again = model.calls
    assert first.params.tool_choice == "auto" and len(first.tools) == 5
    assert (
        first.messages[-1].role == "system"
        and "get_interaction_summary" in first.messages[-1].content
    )
    assert again.params.tool_choice == "required" and again.messages == first.messages
    assert answer.content == "Hello again! Ask me about your data."


def test_a_repeated_call_ends_the_loop_with_one_plain_answer(demo):
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", cid="a"),
            call("get_interaction_summary", cid="b"),
            AssistantTurn(text="You have 3,000 interactions."),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    model.assert_complete()  # three model calls, not five
    assert model.calls[2].params.tool_choice == "none"
    assert len(answer.tool_steps) == 1 and answer.content == "You have 3,000 interactions."


def test_after_tools_ran_the_model_stops_at_a_copy_of_the_results(demo):
    from crow.chat.agent.compose import ECHO_STOPS

    model = ScriptedChatModel(
        [
            call("get_interaction_summary"),
            AssistantTurn(text='{"total_interactions"'),
            AssistantTurn(text="You have 3,000 interactions."),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    assert model.calls[0].params.stop == () and model.calls[1].params.stop == ECHO_STOPS
    assert answer.fallback is None and answer.content == "You have 3,000 interactions."


def test_streamed_text_is_the_answer_and_footnotes_come_last(demo):
    from models.testing import ScriptedChatModel as Scripted

    def answer(messages, tools, params):
        title = json.loads(messages[-1].content)["products"][0]["title"]
        return AssistantTurn(text=f"The top match is {title}, a fine tent.")

    model = Scripted(
        [call("search_products", query="dome tent", limit=1), answer], delta_delay_s=0.01
    )

    async def events():
        agent = Agent(model)
        ctx = ctx_for(demo)
        return [e async for e in agent.events([Message.system("s"), Message.user("tents?")], ctx)]

    seen = asyncio.run(events())
    kinds = [e["type"] for e in seen]
    assert kinds.count("text_delta") > 2 and "text_replaced" not in kinds
    done = seen[-1]["answer"]
    streamed = "".join(e["text"] for e in seen if e["type"] == "text_delta")
    assert streamed.strip() == done.content.strip()
    assert kinds.index("sources") > max(i for i, k in enumerate(kinds) if k == "text_delta")


def test_a_search_before_the_first_indexing_says_search_is_being_prepared(demo):
    """An organization whose indexes are not built yet: the tool's result tells the model that
    search is still being prepared (not a failure to explain), and an answer composed from
    the results says so too."""
    from crow.chat.agent.compose import compose
    from crow.chat.agent.runner import STILL_INDEXING
    from indexes.store import IndexNotFoundError

    class NotIndexedYet:
        async def search(self, *args, **kwargs):
            raise IndexNotFoundError("no published index for acme-outdoor/products")

        async def product_categories(self, org_id):  # read from the data, not the index
            return []

    def relay(messages, tools, params) -> AssistantTurn:  # a model that says what it read
        error = json.loads(messages[-1].content)["error"]
        return AssistantTurn(text="Sorry: " + error.split("failed: ", 1)[1] + ".")

    model = ScriptedChatModel([call("search_products", query="tents"), relay])
    answer = run(Agent(model), ctx_for(demo, retriever=NotIndexedYet()), "Which tents sell?")
    model.assert_complete()
    assert answer.tool_steps[0]["ok"] is False and answer.tool_steps[0]["error"] == STILL_INDEXING
    assert "still being prepared" in answer.content and answer.fallback is None
    composed = compose(
        [("search_products", {"error": f"search_products failed: {STILL_INDEXING}"})]
    )
    assert "still being prepared" in composed


def test_a_count_with_no_tool_behind_it_is_asked_again_once_with_a_call_required(demo):
    """A follow-up answered from an earlier answer's figure ("549 ... on the web" after a CCTV
    count) is asked again, the same messages with a call required; the model picks the
    summary and its channel. Once: after a tool ran, the answer is checked as any other."""
    copied = AssistantTurn(text="549 interactions on the web channel.")
    model = ScriptedChatModel(
        [copied, call("get_interaction_summary", channel="web"), AssistantTurn(text="Done.")]
    )
    answer = run(Agent(model), ctx_for(demo), "And how many on the web?")
    model.assert_complete()
    first, again = model.calls[0], model.calls[1]
    assert (first.params.tool_choice, again.params.tool_choice) == ("auto", "required")
    assert again.messages == first.messages  # the copied answer is not kept
    assert model.calls[2].params.tool_choice == "auto"
    assert [s["name"] for s in answer.tool_steps] == ["get_interaction_summary"]
    assert answer.content == "Done."
    greeting = ScriptedChatModel(
        [AssistantTurn(text="Hello! I can answer 5 kinds of questions about your data.")]
    )
    run(Agent(greeting), ctx_for(demo), "hi")
    greeting.assert_complete()  # states no fact: not asked again


def test_a_figure_stated_after_every_call_failed_is_asked_again_with_a_call_required(demo):
    """A 1.5B whose only call failed (a query refused, an unknown tool) answered with a count
    anyway: it is asked again, a call required, and so is one that says there is no data.
    Saying the data could not be read is kept."""
    failed = call("get_interaction_totals")  # no such tool: an error result
    model = ScriptedChatModel(
        [
            failed,
            AssistantTurn(text="You had 549 interactions on the web."),
            call("get_interaction_summary", cid="c2", channel="web"),
            AssistantTurn(text="Done."),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), "How many on the web?")
    model.assert_complete()
    assert model.calls[2].params.tool_choice == "required"
    assert [s["ok"] for s in answer.tool_steps] == [False, True]
    assert answer.content == "Done."
    # blind30: after a refused time word, "no interactions since ..." is a finding too
    absent = ScriptedChatModel(
        [
            failed,
            AssistantTurn(text="Fresh Mart does not have any interactions since November."),
            call("get_interaction_summary", cid="c2", since="2026-11-01"),
            AssistantTurn(text="Done."),
        ]
    )
    assert run(Agent(absent), ctx_for(demo), "How many since November?").content == "Done."
    assert absent.calls[2].params.tool_choice == "required"
    honest = ScriptedChatModel(
        [failed, AssistantTurn(text="Sorry, I could not read the interaction data.")]
    )
    answer = run(Agent(honest), ctx_for(demo), "How many on the web?")
    honest.assert_complete()
    assert answer.content.startswith("Sorry")


def test_a_decline_after_a_call_refused_for_copying_the_hint_is_asked_again(demo):
    """blind41: a follow-up searched the patterns for the hint's label, was refused, and the
    1.5B answered "I apologize, but I can't assist with that." A refused query can be written
    again: any answer after calls that all failed, one of them refused, is asked again once,
    a call required; which call is still the model's choice."""
    model = ScriptedChatModel(
        [
            call("search_interactions", query="Suggested"),
            AssistantTurn(text="I apologize, but I can't assist with that."),
            call("get_interaction_summary", cid="c2"),
            AssistantTurn(text="Done."),
        ]
    )
    answer = run(Agent(model, AgentConfig(hints=True)), ctx_for(demo), "How many interactions?")
    model.assert_complete()
    assert model.calls[0].messages[-1].content.startswith("Suggested")  # the hint's line
    assert model.calls[2].params.tool_choice == "required"
    assert [s["ok"] for s in answer.tool_steps] == [False, True]
    assert "words of the suggestion" in answer.tool_steps[0]["error"]
    assert answer.content == "Done."


def test_an_answer_that_writes_out_the_hint_line_is_never_kept(demo):
    """blind42: a time word refused ("last 24h", since read), a 1.5B answered with the hint
    line itself. After calls that all failed it is asked again, a call required; after data,
    it gets a correction."""
    from crow.chat.agent.checks import answer_problem

    echo = "Suggested (may be wrong; follow the question): call search_interactions."
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="cctv", since="in the year of the cat"),
            AssistantTurn(text=echo),
            call("get_interaction_summary", cid="c2", channel="cctv", since="last 24h"),
            AssistantTurn(text="Done."),
        ]
    )
    answer = run(Agent(model, AgentConfig(hints=True)), ctx_for(demo), "How many interactions?")
    model.assert_complete()
    assert model.calls[2].params.tool_choice == "required"
    assert [s["ok"] for s in answer.tool_steps] == [False, True] and answer.content == "Done."
    found = [("get_interaction_summary", {"total_interactions": 12, "by_channel": {"cctv": 12}})]
    assert "suggestion line" in (answer_problem(echo.upper(), found) or "")
    assert answer_problem("You had 12 cctv interactions.", found) is None
    after_data = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="cctv"),
            AssistantTurn(text=echo),
            AssistantTurn(text="Done."),
        ]
    )
    answer = run(Agent(after_data, AgentConfig(hints=True)), ctx_for(demo), "cctv events?")
    after_data.assert_complete()
    assert after_data.calls[2].params.tool_choice == "none"  # a correction, no new call
    assert "suggestion line" in after_data.calls[2].messages[-1].content
    assert answer.content == "Done." and answer.fallback is None


def test_an_answer_that_leaves_a_part_unspecified_is_asked_again_with_a_call_required(demo):
    """blind26: "what's the top selling household product, and remind me what the minimum order
    is for free delivery" got one product search and "the minimum order ... is not specified
    in the given data". Such an answer is asked again once, a call required; the answer after
    the new call is kept. An answer that leaves nothing open is kept at once."""
    products = call("search_products", query="household", sort="popularity")
    model = ScriptedChatModel(
        [
            products,
            AssistantTurn(text="Pods lead. The minimum order for free delivery is not specified."),
            call("search_org_context", cid="c2", query="minimum order free delivery"),
            AssistantTurn(text="Pods lead; delivery is free above the minimum order."),
        ]
    )
    question = "top household product, and the minimum order for free delivery?"
    answer = run(Agent(model), ctx_for(demo), question)
    model.assert_complete()
    assert model.calls[2].params.tool_choice == "required"
    assert [s["name"] for s in answer.tool_steps] == ["search_products", "search_org_context"]
    assert answer.content.startswith("Pods lead; delivery is free")
    whole = ScriptedChatModel([products, AssistantTurn(text="Pods lead.")])
    assert run(Agent(whole), ctx_for(demo), question).content.startswith("Pods lead.")
    whole.assert_complete()


def test_a_query_copied_from_the_hint_is_an_error_result_for_the_model(demo):
    """A 1.5B searched the patterns for the hint's label ("Routing hint", as it was) after "and
    which one has the lowest confidence?": such a call is not run; its result tells the model
    to write the query from the question. A query with the question's words runs, and so does
    any query with no hint."""
    from crow.chat.agent.guidance import copies_the_hint
    from crow.chat.agent.runner import run_tools
    from crow.chat.agent.step import AgentRun
    from crow.chat.agent.tools import TOOLS_BY_NAME

    hint = "Suggested (may be wrong; follow the question): call search_patterns."
    asked = ["which seasonal pattern is the most confident?", "and which one is the lowest?"]
    assert copies_the_hint("Suggested", hint, asked)
    assert copies_the_hint("call", hint, asked)
    # a tool's name is not the hint's prose: "product" names no topic (the catalog ranked);
    # refused, a 1.5B declined "what was our most popular prodcut in october"
    products = "Suggested (may be wrong; follow the question): call search_products."
    assert not copies_the_hint("product", products, ["our most popular prodcut in october"])
    assert not copies_the_hint("search patterns", hint, asked)
    for query in ("seasonal patterns", "lowest confidence seasonal", "", "Suggested"):
        assert not copies_the_hint(query, "" if query == "Suggested" else hint, asked)
    # a plural of the user's word is the user's word (blind23: "likely patterns" was refused,
    # and the 1.5B answered from nothing)
    plural = "Suggested: likely patterns. likely tools: search_patterns."
    assert not copies_the_hint("likely patterns", plural, ["the pattern we're most sure of?"])
    assert copies_the_hint("likely patterns", plural, ["what are we most sure of?"])

    state = AgentRun([Message.user(q) for q in asked], lambda event: None, hint=hint)
    calls = [
        ToolCall(id="c1", name="search_patterns", arguments={"query": "Suggested"}),
        ToolCall(id="c2", name="search_patterns", arguments={"query": "seasonal"}),
    ]
    copied, kept = asyncio.run(run_tools(TOOLS_BY_NAME, calls, state, ctx_for(demo), 10.0))
    assert not copied["ok"] and "words of the suggestion" in copied["error"]
    told = state.messages[-2].content
    assert "write the query from what the question asks" in told
    # the pattern query may be empty (all patterns), and the model is told so
    assert "or an empty query if it names no topic" in told
    assert kept["ok"] and kept["results"] > 0
    # a tool whose query is required is not told to leave it empty
    kb = [ToolCall(id="c3", name="search_org_context", arguments={"query": "Suggested"})]
    (refused,) = asyncio.run(run_tools(TOOLS_BY_NAME, kb, state, ctx_for(demo), 10.0))
    assert not refused["ok"] and "empty query" not in state.messages[-1].content
