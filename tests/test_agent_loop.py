"""The agent loop with the scripted model over real tools (hash embedder, real FAISS, DuckDB)."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from crow.agent.context import ToolContext
from crow.agent.loop import Agent, AgentConfig
from crow.chat import ChatService, ChatServices, SessionNotFound
from crow.services import ThreadProxy
from crow.store.chat_store import ChatStore
from models.errors import ModelTimeout
from models.messages import AssistantTurn, InvalidToolCall, Message, ToolCall
from models.testing import ScriptedChatModel
from tests.demo_env import build_demo_env

ORG = "acme-outdoor"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


def call(name: str, cid: str = "c1", **arguments) -> AssistantTurn:
    return AssistantTurn(
        tool_calls=(ToolCall(id=cid, name=name, arguments=arguments),), finish_reason="tool_calls"
    )


def ctx_for(demo, **overrides) -> ToolContext:
    p = {**demo.proxies(), **overrides}
    return ToolContext(ORG, p["embedder"], p["retriever"], p["analytics"])


def run(agent: Agent, ctx: ToolContext, question: str = "q"):
    return asyncio.run(agent.run([Message.system("s"), Message.user(question)], ctx))


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
    model = ScriptedChatModel([
        AssistantTurn(tool_calls=(ToolCall(id="a", name="search_products", arguments={"query": "dome tent", "limit": 2}),
                                  ToolCall(id="b", name="search_patterns", arguments={"query": "trend", "limit": 1}),
                                  ToolCall(id="c", name="search_interactions", arguments={"query": "queue", "channel": "cctv", "limit": 1}),
                                  ToolCall(id="d", name="search_org_context", arguments={"query": "target market", "limit": 1}))),
        lambda messages, tools, params: AssistantTurn(text="Here is what I found. Also see the Imaginary Tent 9000."),
    ])  # fmt: skip
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

    model = ScriptedChatModel([
        AssistantTurn(tool_calls=(ToolCall(id="a", name="search_patterns", arguments={"query": "trend"}),
                                  ToolCall(id="b", name="search_org_context", arguments={"query": "returns"}))),
        AssistantTurn(text="done"),
    ])  # fmt: skip
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

    model = ScriptedChatModel([
        AssistantTurn(tool_calls=(ToolCall(id="a", name="search_products", arguments={"query": "tent"}),
                                  ToolCall(id="b", name="get_interaction_summary", arguments={}))),
        AssistantTurn(text="Sorry, the data is not available right now."),
    ])  # fmt: skip
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
    bad = AssistantTurn(invalid_tool_calls=(InvalidToolCall(id="x", name="search_products", raw="{}",
                                                             reason="limit must be <= 20"),))  # fmt: skip
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
    model = ScriptedChatModel([
        AssistantTurn(tool_calls=(ToolCall(id="a", name="search_products", arguments={"query": "Rain jacket"}),
                                  ToolCall(id="b", name="search_interactions", arguments={"query": "rain  jacket"}))),
        call("search_patterns", cid="c", query="rain jacket"),
        AssistantTurn(text="ok"),
    ])  # fmt: skip
    run(Agent(model), ctx_for(demo, embedder=counting))
    assert counting.texts == ["rain jacket"]


@pytest.fixture
def chat(demo, tmp_path):
    store = ChatStore(tmp_path / "chat.duckdb")
    model = ScriptedChatModel()
    service = ChatService(ChatServices(store=ThreadProxy(store), org_names={ORG: "Acme Outdoor"},
                                       **demo.proxies()), Agent(model))  # fmt: skip
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


@pytest.mark.parametrize(
    ("question", "arguments", "kept"),
    [
        ("How many interactions do we have?", {"channel": "web", "since": "2023-01-01", "until": "2023-01-31"}, {}),
        ("How many store camera interactions last week?", {"channel": "cctv", "since": "last week"},
         {"channel": "cctv", "since": "last week"}),
        ("Any unusual spikes lately?", {"query": "spike", "type": "anomaly", "since": "recent"},
         {"query": "spike", "type": "anomaly", "since": "recent"}),
        ("What do people post about our tents?", {"query": "tents", "channel": "social", "type": "trend"},
         {"query": "tents", "channel": "social"}),
    ],
)  # fmt: skip
def test_grounding_drops_filters_the_question_never_asked_for(question, arguments, kept):
    from crow.agent.grounding import ground_arguments

    got, dropped = ground_arguments(question, arguments)
    assert got == kept and set(dropped) == set(arguments) - set(kept)


def test_grounded_count_uses_the_whole_data(demo):
    model = ScriptedChatModel([
        call("get_interaction_summary", channel="web", since="2023-01-01", until="2023-01-31"),
        lambda messages, tools, params: AssistantTurn(text=messages[-1].content),
    ])  # fmt: skip
    answer = run(
        Agent(model, AgentConfig(ground_arguments=True)),
        ctx_for(demo),
        "How many interactions do we have?",
    )
    assert answer.content.startswith("You have **3,000** interactions")  # echoed JSON -> composed
    assert answer.fallback == "composed"
    assert answer.tool_steps[0]["dropped"] == ["channel", "since", "until"]


@pytest.mark.parametrize(
    ("text", "composed"),
    [("You have 3,000 interactions in total.", False), ("There are 2,140 web interactions.", True),
     ("We have 1234 interactions since 2026.", True), ('```json\n{"total_interactions": 3000}\n```', True),
     ("", True)],
)  # fmt: skip
def test_count_answers_are_checked_against_the_summary(demo, text, composed):
    model = ScriptedChatModel([call("get_interaction_summary"), AssistantTurn(text=text)])
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    assert (answer.fallback == "composed") is composed
    assert "3,000" in answer.content


def test_an_echoed_search_result_is_composed_into_a_list_with_footnotes(demo):
    model = ScriptedChatModel([
        call("search_products", query="dome tent", limit=2),
        lambda messages, tools, params: AssistantTurn(text=messages[-1].content),
    ])  # fmt: skip
    answer = run(Agent(model), ctx_for(demo), "Show me dome tents")
    body, notes = answer.content.split("\n\n", 1)
    assert body.startswith("Products:\n- **") and notes.startswith('[1] Product: "')
    assert len(answer.sources) == 2


def test_an_answer_naming_a_product_no_tool_returned_is_composed_from_the_results(demo):
    def answer(messages, tools, params):
        title = json.loads(messages[-1].content)["products"][0]["title"]
        return AssistantTurn(text=f"- **{title}**: popular\n- **Glacier Explorer Tent**: new")

    model = ScriptedChatModel([call("search_products", query="dome tent", limit=2), answer])
    composed = run(Agent(model), ctx_for(demo), "Show me dome tents")
    assert composed.fallback == "composed" and "Glacier Explorer" not in composed.content
    honest = ScriptedChatModel([
        call("search_products", query="dome tent", limit=2),
        lambda messages, tools, params: AssistantTurn(
            text=f"- **{json.loads(messages[-1].content)['products'][0]['title']}**: popular"),
    ])  # fmt: skip
    kept = run(Agent(honest), ctx_for(demo), "Show me dome tents")
    assert kept.fallback is None and kept.content.startswith("- **")


def test_a_repeated_call_ends_the_loop_with_a_composed_answer(demo):
    model = ScriptedChatModel(
        [call("get_interaction_summary", cid="a"), call("get_interaction_summary", cid="b")]
    )
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    model.assert_complete()  # two model calls, not five
    assert len(answer.tool_steps) == 1 and answer.content.count("3,000") == 1


@pytest.mark.parametrize(
    ("message", "small_talk"),
    [("Hello there!", True), ("thanks a lot", True), ("Good morning", True), ("Who are you?", True),
     ("Hi, how many interactions do we have?", False), ("hey, show me top products", False),
     ("What is our return policy?", False), ("ok", True)],
)  # fmt: skip
def test_small_talk_router(message, small_talk):
    from crow.agent.router import is_small_talk

    assert is_small_talk(message) is small_talk


def test_small_talk_is_answered_without_tools_when_routed(demo):
    model = ScriptedChatModel([AssistantTurn(text="Hello! How can I help?")])
    answer = run(Agent(model, AgentConfig(route_small_talk=True)), ctx_for(demo), "Hey!")
    assert (
        model.calls[0].params.tool_choice == "none"
        and answer.tool_steps == []
        and answer.sources == []
    )


def test_after_tools_ran_the_model_stops_at_a_copy_of_the_results(demo):
    from crow.agent.compose import ECHO_STOPS

    model = ScriptedChatModel(
        [call("get_interaction_summary"), AssistantTurn(text='{"total_interactions"')]
    )
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    assert model.calls[0].params.stop == () and model.calls[1].params.stop == ECHO_STOPS
    assert answer.fallback == "composed" and "3,000" in answer.content


@pytest.mark.parametrize(
    ("message", "count"),
    [("How many store visits did we get last month?", True), ("number of social posts about tents", True),
     ("Total online orders, please", True), ("How many products do we sell?", False),
     ("Show me recent complaints", False), ("How many interactions mention jackets?", True)],
)  # fmt: skip
def test_count_router(message, count):
    from crow.agent.router import is_count_question

    assert is_count_question(message) is count


def test_count_questions_call_the_summary_first_when_routed(demo):
    from models.messages import NamedToolChoice

    model = ScriptedChatModel(
        [call("get_interaction_summary"), AssistantTurn(text="You have 3,000 interactions.")]
    )
    run(
        Agent(model, AgentConfig(route_counts=True)),
        ctx_for(demo),
        "How many store visits did we get?",
    )
    assert model.calls[0].params.tool_choice == NamedToolChoice(name="get_interaction_summary")
    assert model.calls[1].params.tool_choice == "none"  # a plain count: answer from the summary


def test_a_plain_count_is_answered_from_the_summary_without_more_tools(demo):
    model = ScriptedChatModel(
        [call("get_interaction_summary"), AssistantTurn(text="You have 3,000 interactions.")]
    )
    answer = run(
        Agent(model, AgentConfig(route_counts=True)),
        ctx_for(demo),
        "How many CCTV visits were recorded?",
    )
    model.assert_complete()
    assert model.calls[1].params.tool_choice == "none" and answer.iterations == 2
    mixed = ScriptedChatModel([call("get_interaction_summary"), AssistantTurn(text="ok")])
    run(
        Agent(mixed, AgentConfig(route_counts=True)),
        ctx_for(demo),
        "How many web visits, and show me a few?",
    )
    assert mixed.calls[1].params.tool_choice != "none"  # a search may follow


@pytest.mark.parametrize(
    ("tool", "question", "arguments", "filled"),
    [("get_interaction_summary", "How many CCTV interactions were recorded?", {}, {"channel": "cctv"}),
     ("get_interaction_summary", "How many online and in-store visits?", {}, {}),
     ("search_interactions", "Show me social posts from the past 3 days", {"query": "posts"},
      {"query": "posts", "channel": "social", "since": "past 3 days"}),
     ("search_patterns", "Patterns from the last week", {"query": "patterns"},
      {"query": "patterns", "since": "last week"}),
     ("search_products", "Top products last week", {"query": ""}, {"query": "", "sort": "popularity"}),
     ("search_products", "Find dome tents", {"query": "dome tent"}, {"query": "dome tent"})],
)  # fmt: skip
def test_filters_stated_in_the_question_are_filled_in(tool, question, arguments, filled):
    from crow.agent.grounding import fill_arguments

    assert fill_arguments(tool, question, arguments)[0] == filled


def test_a_channel_count_reports_that_channel(demo):
    model = ScriptedChatModel([call("get_interaction_summary"), AssistantTurn(text="")])
    answer = run(
        Agent(model, AgentConfig(ground_arguments=True)),
        ctx_for(demo),
        "How many CCTV interactions?",
    )
    cctv = demo.analytics.interaction_summary(ORG, channel="cctv")["total"]
    assert answer.content.startswith(f"You have **{cctv:,}** interactions on the cctv channel")
    assert answer.tool_steps[0]["added"] == ["channel"]


def test_a_malformed_routed_count_call_still_runs_the_summary(demo):
    bad = AssistantTurn(invalid_tool_calls=(InvalidToolCall(id="x", name="get_interaction_summary", raw="{}",
                                                             reason="channel: 'all' is not one of web, cctv, social"),))  # fmt: skip
    model = ScriptedChatModel([bad, AssistantTurn(text="")])
    agent = Agent(model, AgentConfig(route_counts=True, ground_arguments=True))
    answer = run(agent, ctx_for(demo), "How many social interactions do we have?")
    social = demo.analytics.interaction_summary(ORG, channel="social")["total"]
    assert (
        answer.tool_steps[0]["name"] == "get_interaction_summary"
        and f"**{social:,}**" in answer.content
    )


@pytest.mark.parametrize(
    ("message", "org"),
    [("What is our refund policy?", True), ("Tell me about our company", True), ("Who are our main competitors?", True),
     ("Where are our store locations?", True), ("How many returns did we get online?", False),
     ("Show me recent web interactions", False), ("Which tents sell best?", False)],
)  # fmt: skip
def test_org_router(message, org):
    from crow.agent.router import is_org_question

    assert is_org_question(message) is org


def test_a_company_question_searches_the_knowledge_base_first(demo):
    from models.messages import NamedToolChoice

    model = ScriptedChatModel(
        [call("search_org_context", query="refund policy"), AssistantTurn(text="60 days.")]
    )
    answer = run(
        Agent(model, AgentConfig(route_counts=True)), ctx_for(demo), "What is our refund policy?"
    )
    model.assert_complete()
    assert model.calls[0].params.tool_choice == NamedToolChoice(name="search_org_context")
    assert model.calls[1].params.tool_choice == "none" and answer.sources[0].type == "org_context"
