"""The agent loop with the scripted model over real tools (hash embedder, real FAISS, DuckDB)."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from crow.chat.agent.loop import Agent, AgentConfig
from crow.chat.service import SessionNotFound
from crow.services import ThreadProxy
from crow.store.chat_store import ChatStore
from models.errors import ModelTimeout
from models.messages import AssistantTurn, InvalidToolCall, Message, ToolCall
from models.testing import ScriptedChatModel
from tests.agent_support import ORG, call, ctx_for, run
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


def test_footnotes_are_numbered_typed_and_only_from_returned_sources(demo):
    model = ScriptedChatModel(
        [
            AssistantTurn(
                tool_calls=(
                    ToolCall(
                        id="a", name="search_products", arguments={"query": "dome tent", "limit": 2}
                    ),
                    ToolCall(
                        id="b", name="search_patterns", arguments={"query": "trend", "limit": 1}
                    ),
                    ToolCall(
                        id="c",
                        name="search_interactions",
                        arguments={"query": "queue", "channel": "cctv", "limit": 1},
                    ),
                    ToolCall(
                        id="d",
                        name="search_org_context",
                        arguments={"query": "target market", "limit": 1},
                    ),
                )
            ),
            lambda messages, tools, params: AssistantTurn(
                text="Here is what I found. Also see the Imaginary Tent 9000."
            ),
        ]
    )
    answer = run(Agent(model), ctx_for(demo))
    notes = answer.content.split("\n\n")[-1].splitlines()
    assert [n[:4] for n in notes] == ["[1] ", "[2] ", "[3] ", "[4] ", "[5] "]
    assert re.fullmatch(r'\[1\] Product: ".+"', notes[0])
    assert re.fullmatch(
        r'\[3\] Pattern: ".+" \((trend|anomaly|segment|seasonal|churn-risk|affinity)\)', notes[2]
    )
    assert re.fullmatch(r"\[4\] Interaction #int-\d{7} \(cctv\)", notes[3])
    assert re.fullmatch(r'\[5\] Org context: ".+" \(\w+\)', notes[4])
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
    turns = [call("search_patterns", cid=f"c{i}", query=f"trend {i}") for i in range(5)]
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
    assert counting.texts == ["rain jacket"]


@pytest.fixture
def chat(demo, tmp_path):
    store = ChatStore(tmp_path / "chat.duckdb")
    model = ScriptedChatModel()
    service = demo.chat(model, store=store, config=AgentConfig())
    yield service, store, model
    store.close()


def test_context_is_the_last_ten_messages(chat):
    service, store, model = chat
    session = store.create_session(ORG)
    for i in range(12):
        store.add_message(ORG, session["id"], "user" if i % 2 == 0 else "assistant", f"old {i}")
    model.add(AssistantTurn(text="Hello!"))
    asyncio.run(service.send(ORG, session["id"], "Hi!"))
    sent = model.calls[0].messages
    assert (
        sent[0].role == "system"
        and "CROW AI, an intelligent retail analytics assistant" in sent[0].content
    )
    assert [m.content for m in sent[1:]] == [f"old {i}" for i in range(2, 12)] + ["Hi!"]


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
    assert message["timings"]["iterations"] == 2 and message["timings"]["embed_calls"] == 1
    assert store.get_session(ORG, session["id"])["title"] == "What is our return policy?"
    with pytest.raises(SessionNotFound):
        asyncio.run(service.send("fresh-mart", session["id"], "sneaky"))


def test_no_tool_runs_that_the_model_did_not_call(demo):
    """With the small-model hints on, a count question the model answers without tools
    runs no tool: the hint is a line the model reads, not a call made for it."""
    model = ScriptedChatModel([AssistantTurn(text="Hello! Ask me about your data.")])
    agent = Agent(model, AgentConfig(hints=True))
    answer = run(agent, ctx_for(demo), "How many interactions do we have?")
    assert answer.tool_steps == [] and answer.sources == []
    sent = model.calls[0]
    assert sent.params.tool_choice == "auto" and len(sent.tools) == 5
    assert (
        sent.messages[-1].role == "system"
        and "get_interaction_summary" in sent.messages[-1].content
    )


@pytest.mark.parametrize(
    "text",
    [
        "## Interactions\n\nYou have **3,000** interactions in total.\n\n**Key takeaway:** web leads.",
        "- **Busiest channel:** web\n- **Share online:** 45%\n- Total: about 3,000",
        "**Key Takeaway**: roughly 3k interactions, 45.5% of them on the web.",
        "You had 3,000 interactions in 2026; that is up 12% on last year.",
        "| Channel | Share |\n|---|---|\n| Web | 45% |\n| CCTV | 30% |",
        "From September 1 to November 29, 2026 you had **3,000** interactions.",
        "Your interactions run from September 1 to November 29, 2026.",
        "Between 2026-09-01 and 2026-11-29 (the 29th of Nov), 3,000 interactions; the last at 22:58.",
    ],
)
def test_a_strong_model_style_answer_passes_every_check_unchanged(demo, text):
    model = ScriptedChatModel([call("get_interaction_summary"), AssistantTurn(text=text)])
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    model.assert_complete()
    assert answer.fallback is None and answer.content == text


def test_a_wrong_count_gets_one_correction_round(demo):
    model = ScriptedChatModel(
        [
            call("get_interaction_summary"),
            AssistantTurn(text="There are 2,140 interactions."),
            AssistantTurn(text="There are 3,000 interactions."),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    correction = model.calls[2].messages[-1]
    assert (
        correction.role == "user"
        and "2,140" in correction.content
        and "3,000" in correction.content
    )
    assert model.calls[2].params.tool_choice == "none"
    assert answer.content == "There are 3,000 interactions." and answer.fallback is None


@pytest.mark.parametrize(
    "text",
    [
        "There are 2,140 web interactions.",
        "We have 1234 interactions since 2026.",
        "To count them, use the `get_interaction_summary` function with no filters.",
        '```json\n{"total_interactions": 3000}\n```',
        "",
    ],
)
def test_an_answer_wrong_twice_is_composed_and_says_so(demo, text):
    model = ScriptedChatModel(
        [call("get_interaction_summary"), AssistantTurn(text=text), AssistantTurn(text=text)]
    )
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    model.assert_complete()
    assert answer.fallback == "composed" and "3,000" in answer.content


def test_an_echoed_search_result_is_composed_into_a_list_with_footnotes(demo):
    echo = lambda messages, tools, params: AssistantTurn(  # noqa: E731
        text=next(m.content for m in reversed(messages) if m.role == "tool")
    )
    model = ScriptedChatModel([call("search_products", query="dome tent", limit=2), echo, echo])
    answer = run(Agent(model), ctx_for(demo), "Show me dome tents")
    body, notes = answer.content.split("\n\n", 1)
    assert body.startswith("Products:\n- **") and notes.startswith('[1] Product: "')
    assert len(answer.sources) == 2 and answer.fallback == "composed"


def test_an_answer_naming_a_product_no_tool_returned_is_corrected(demo):
    def title(messages) -> str:
        tool = next(m for m in reversed(messages) if m.role == "tool")
        return json.loads(tool.content)["products"][0]["title"]

    model = ScriptedChatModel(
        [
            call("search_products", query="dome tent", limit=2),
            lambda m, t, p: AssistantTurn(
                text=f"- **{title(m)}**: popular\n- **Glacier Explorer Tent** is new"
            ),
            lambda m, t, p: AssistantTurn(text=f"- **{title(m)}**: popular"),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), "Show me dome tents")
    assert "Glacier Explorer Tent" in model.calls[2].messages[-1].content
    assert answer.fallback is None and "Glacier" not in answer.content


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


@pytest.mark.parametrize(
    ("message", "small_talk"),
    [
        ("Hello there!", True),
        ("thanks a lot", True),
        ("Good morning", True),
        ("Who are you?", True),
        ("Hi, how many interactions do we have?", False),
        ("hey, show me top products", False),
        ("What is our return policy?", False),
        ("ok", True),
    ],
)
def test_small_talk_cues(message, small_talk):
    from crow.chat.agent.cues import is_small_talk

    assert is_small_talk(message) is small_talk


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


@pytest.mark.parametrize(
    ("message", "count"),
    [
        ("How many store visits did we get last month?", True),
        ("number of social posts about tents", True),
        ("Total online orders, please", True),
        ("How many products do we sell?", False),
        ("Show me recent complaints", False),
        ("How many interactions mention jackets?", True),
    ],
)
def test_count_cues(message, count):
    from crow.chat.agent.cues import is_count_question

    assert is_count_question(message) is count


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


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "top products", "sort": "popularity"},
        {"query": "our best-selling products"},
        {"query": ""},
    ],
)
def test_top_products_overall_equal_the_duckdb_ranking(demo, arguments):
    import duckdb

    from crow.chat.agent.tools import TOOLS_BY_NAME

    output = asyncio.run(
        TOOLS_BY_NAME["search_products"].invoke({**arguments, "limit": 5}, ctx_for(demo))
    )
    glob = demo.lake.parquet_glob(ORG, "interactions")
    with duckdb.connect() as con:
        truth = con.execute(
            "SELECT product_id FROM read_parquet(?) WHERE product_id IS NOT NULL "
            "GROUP BY 1 ORDER BY count(*) DESC, product_id LIMIT 5",
            [glob],
        ).fetchall()
    assert [p["id"] for p in output.content["products"]] == [t[0] for t in truth]


def test_top_products_of_a_topic_rank_that_topics_products(demo):
    from crow.chat.agent.tools import TOOLS_BY_NAME

    args = {"query": "tents", "sort": "popularity", "limit": 5}
    output = asyncio.run(TOOLS_BY_NAME["search_products"].invoke(args, ctx_for(demo)))
    counts = [p["interactions"] for p in output.content["products"]]
    assert counts == sorted(counts, reverse=True)
    assert all("tent" in (p["title"] + p["category"]).lower() for p in output.content["products"])


def test_a_channel_filter_counts_only_that_channel_and_all_means_none(demo):
    """No zero counts for the channels filtered out (a small model read them as "web is the
    busiest"), the busiest and quietest channel named (it does not compare figures reliably);
    'all' is a value a small model can write instead of inventing a channel."""
    from crow.chat.agent.tools import TOOLS_BY_NAME

    summary = TOOLS_BY_NAME["get_interaction_summary"]
    web = asyncio.run(summary.invoke({"channel": "web"}, ctx_for(demo))).content
    every = asyncio.run(summary.invoke({"channel": "all", "since": "all time"}, ctx_for(demo)))
    assert web["by_channel"] == {"web": web["total_interactions"]}
    counts = every.content["by_channel"]
    assert set(counts) == {"web", "cctv", "social"} and list(counts.values()) == sorted(
        counts.values(), reverse=True
    )
    assert every.content["busiest_channel"] == max(counts, key=counts.get)
    assert every.content["quietest_channel"] == min(counts, key=counts.get)
    assert f"busiest {every.content['busiest_channel']}" in every.content["in_words"]
    assert "busiest_channel" not in web
    assert (
        every.content["total_interactions"]
        == sum(every.content["by_channel"].values())
        > web["total_interactions"]
    )


def test_an_empty_result_under_filters_says_what_to_try(demo):
    from crow.chat.agent.tools import TOOLS_BY_NAME

    args = {"query": "jackets", "since": "2020-01-01", "until": "2020-01-02"}
    empty = asyncio.run(TOOLS_BY_NAME["search_interactions"].invoke(args, ctx_for(demo)))
    assert empty.content["interactions"] == [] and "without them" in empty.content["note"]
    assert "since='2020-01-01'" in empty.content["note"]
    found = asyncio.run(
        TOOLS_BY_NAME["search_interactions"].invoke({"query": "jackets"}, ctx_for(demo))
    )
    assert found.content["interactions"] and "note" not in found.content
