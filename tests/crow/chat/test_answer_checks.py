"""Answer checks (crow.chat.agent.checks) and cues: no false positives on strong-model answers,
one correction round, a composed answer that says so."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from crow.chat.agent.checks import half_compared
from crow.chat.agent.config import AgentConfig
from crow.chat.agent.loop import Agent
from crow.chat.agent.pattern_search import search_patterns
from crow.chat.agent.tool_args import PatternArgs
from crow.chat.agent.unsourced import unsourced_answer
from models.messages import AssistantTurn, Message
from models.testing import ScriptedChatModel
from tests.agent_support import call, ctx_for, run
from tests.demo_env import build_demo_env


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


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
        "**3,000**",
        "3,000 in all",
        "Over the last 30 days, social was the quietest channel.",
        "In the last 24h social was the quietest channel.",
    ],
)
def test_a_strong_model_style_answer_passes_every_check_unchanged(demo, text):
    model = ScriptedChatModel([call("get_interaction_summary"), AssistantTurn(text=text)])
    answer = run(Agent(model), ctx_for(demo), "How many interactions do we have?")
    model.assert_complete()
    assert answer.fallback is None and answer.content == text


def test_a_wrong_count_gets_one_correction_round(demo):
    """The correction's conversation leaves out the hint line after the question (hints on):
    its calls are made, and corrected, a 1.5B wrote the line itself as its answer."""
    model = ScriptedChatModel(
        [
            call("get_interaction_summary"),
            AssistantTurn(text="There are 2,140 interactions."),
            AssistantTurn(text="There are 3,000 interactions."),
        ]
    )
    agent = Agent(model, AgentConfig(hints=True))
    answer = run(agent, ctx_for(demo), "How many interactions do we have?")
    hint = model.calls[0].messages[-1]
    assert hint.role == "system" and hint.content.startswith("Suggested")
    assert hint in model.calls[1].messages and hint not in model.calls[2].messages
    correction = model.calls[2].messages[-1]
    assert (
        correction.role == "user"
        and "2,140" in correction.content
        and "3,000" in correction.content
    )
    assert model.calls[2].params.tool_choice == "none"
    assert answer.content == "There are 3,000 interactions." and answer.fallback is None


def test_a_correction_drops_the_hint_line_and_no_other_system_message():
    """After an invalid call the retry message is a user message after the hint line: the hint
    is still left out, and the system prompt and organization line stay."""
    from crow.chat.agent.checks import for_correction
    from models.messages import ToolCall

    hint = "Suggested (may be wrong; follow the question): call get_interaction_summary."
    messages = [
        Message.system("prompt"),
        Message.system("org line"),
        Message.user("How many interactions?"),
        Message.system(hint),
        Message.assistant("", (ToolCall(id="c1", name="get_interaction_summary", arguments={}),)),
        Message.tool("{}", tool_call_id="c1", name="get_interaction_summary"),
        Message.user("The call was invalid; call again."),
    ]
    kept = for_correction(messages, "Your answer states 2.", hint)
    assert [m.content for m in kept[:2]] == ["prompt", "org line"]
    assert all(m.content != hint for m in kept) and len(kept) == len(messages)
    assert for_correction(messages, "p")[3].content == hint  # no hints: nothing to drop


def test_an_answer_that_repeats_the_earlier_one_gets_one_correction_round(demo):
    """Asked "how much is it?" after "most popular bakery product?", a 1.5B wrote its earlier
    answer again although the price was in the results: the correction names the new
    question, and the second answer stands."""
    import asyncio

    from models.messages import Message

    earlier = 'The most popular tent is Summit Dome 2, with 479 interactions.\n\n[1] Product: "x"'
    history = [
        Message.system("s"),
        Message.user("what's our most popular tent?"),
        Message.assistant(earlier),
        Message.user("how much is it?"),
    ]
    model = ScriptedChatModel(
        [
            call("search_products", query="Summit Dome 2"),
            AssistantTurn(text="The most popular tent is Summit Dome 2, with 479 interactions."),
            AssistantTurn(text="Summit Dome 2 costs 199.00."),
        ]
    )
    answer = asyncio.run(Agent(model).run(history, ctx_for(demo)))
    model.assert_complete()
    correction = model.calls[2].messages[-1]
    assert correction.role == "user" and "'how much is it?'" in correction.content
    # it points at what the new result leads with: the product's price, asked for
    assert "The tool result for it begins: 'Prices asked for." in correction.content
    assert "price" in correction.content.split("begins:")[1]
    # neither the answer it corrects nor the chat's earlier answer is shown again; the
    # questions, the call and its result are
    shown = model.calls[2].messages
    assert all(m.role != "assistant" or m.tool_calls for m in shown)
    assert [m.content for m in shown if m.role == "user"][:2] == [
        "what's our most popular tent?",
        "how much is it?",
    ]
    assert any(m.role == "tool" for m in shown)
    assert answer.content.startswith("Summit Dome 2 costs 199.00.") and answer.fallback is None

    # repeated again after the correction: kept (it hides nothing), never composed
    twice = ScriptedChatModel(
        [call("search_products", query="Summit Dome 2"), *[AssistantTurn(text=earlier)] * 2]
    )
    kept = asyncio.run(Agent(twice).run(history, ctx_for(demo)))
    twice.assert_complete()
    assert kept.fallback is None and kept.content.startswith("The most popular tent is")

    # the same question asked again may get the same answer, and a follow-up's answer in the
    # same words with other figures is no repeat: no correction
    again = [*history[:3], Message.user("what's our most popular tent?")]
    alike = "The most popular tent is Summit Dome 3, with 412 interactions."
    for messages, text in ((again, earlier), (history, alike)):
        model = ScriptedChatModel([call("search_products", query="tent"), AssistantTurn(text=text)])
        assert asyncio.run(Agent(model).run(messages, ctx_for(demo))).fallback is None
        model.assert_complete()


def test_a_comparison_with_the_channels_beside_a_channels_count_passes(demo):
    """A summary called for one channel also returns every channel's count over the period;
    an answer comparing two of them states figures the tool returned."""
    by = demo.analytics.interaction_summary("acme-outdoor")["by_channel"]
    text = f"Social ({by['social']:,}) is ahead of the store cameras ({by['cctv']:,})."
    model = ScriptedChatModel(
        [call("get_interaction_summary", channel="cctv"), AssistantTurn(text=text)]
    )
    answer = run(Agent(model), ctx_for(demo), "Which is bigger, the cameras or social?")
    model.assert_complete()
    assert answer.fallback is None and answer.content == text


def test_one_side_of_a_compared_pair_gets_one_correction_round(demo):
    """Asked for both channels' counts, a 1.5B stated the one it had called for: the
    correction names both channels with their figures; one side again (blind33, blind37) is
    replaced by an answer composed from the results, which gives every channel's count. An
    answer with both, or with none, passes."""
    by = demo.analytics.interaction_summary("acme-outdoor")["by_channel"]
    question = "compare web and cctv interactions, I need both counts"
    one = f"The web had {by['web']:,} interactions."
    both = f"The web had {by['web']:,} interactions and the cameras {by['cctv']:,}."
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="web"),
            AssistantTurn(text=one),
            AssistantTurn(text=both),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), question)
    model.assert_complete()
    correction = model.calls[2].messages[-1].content
    assert f"web ({by['web']:,})" in correction and f"cctv ({by['cctv']:,})" in correction
    assert answer.content == both and answer.fallback is None

    twice = ScriptedChatModel(
        [call("get_interaction_summary", channel="web"), *[AssistantTurn(text=one)] * 2]
    )
    composed = run(Agent(twice), ctx_for(demo), question)
    twice.assert_complete()
    assert composed.fallback == "composed"
    assert f"{by['web']:,}" in composed.content and f"{by['cctv']:,} cctv" in composed.content

    for text in (both, "The web is busier than the cameras."):
        model = ScriptedChatModel([call("get_interaction_summary"), AssistantTurn(text=text)])
        assert run(Agent(model), ctx_for(demo), question).content == text
        model.assert_complete()


def test_a_breakdown_by_channel_short_of_a_channel_gets_one_correction_round(demo):
    """Asked for the count of every channel, a 1.5B gave the total, the busiest and the
    quietest: the correction names every channel with its figure. An answer with every
    channel (a table, bold labels), or with none (a total and shares), passes unchanged; a
    question that asks for no channel's figure is left alone."""
    by = demo.analytics.interaction_summary("acme-outdoor")["by_channel"]
    ranked = sorted(by, key=by.__getitem__)
    quietest, _, busiest = ranked
    question = "break down our interactions per channel, I need the number for each"
    short = (
        f"The busiest channel is {busiest} with {by[busiest]:,} interactions, and the "
        f"quietest is {quietest} with {by[quietest]:,}."
    )
    table = "| Channel | Interactions |\n|---|---|\n" + "\n".join(
        f"| {ch} | {by[ch]:,} |" for ch in ranked
    )
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="all"),
            AssistantTurn(text=short),
            AssistantTurn(text=table),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), question)
    model.assert_complete()
    correction = model.calls[2].messages[-1].content
    assert all(f"{ch} ({by[ch]:,})" in correction for ch in by)
    # a total "across every channel" asks for no channel's figure (blind40, "just need the
    # total": the total with the busiest and quietest was corrected, then composed)
    assert half_compared(short, [("get_interaction_summary", {"by_channel": by})], question)
    total_asked = "how many interactions across every channel? just need the total"
    assert (
        half_compared(short, [("get_interaction_summary", {"by_channel": by})], total_asked) is None
    )
    assert f"gives the figure for {busiest}, {quietest} only" in correction
    assert answer.content == table and answer.fallback is None

    total = sum(by.values())
    labels = "\n".join(f"- **{ch.upper()}:** {by[ch]:,}" for ch in ranked)
    shares = (
        f"Of {total:,} interactions, {busiest} has the largest share and {quietest} the smallest."
    )
    for text, asked in (
        (labels, question),
        (shares, question),
        (short, "which channel is busiest?"),
    ):
        model = ScriptedChatModel([call("get_interaction_summary"), AssistantTurn(text=text)])
        assert run(Agent(model), ctx_for(demo), asked).content == text
        model.assert_complete()


def test_a_comparisons_check_reads_every_summary_and_no_figure_too_small_to_be_a_count():
    """A channel whose figure is under 10 (or none at all) is not asked for: the answer
    cannot be seen to state it. A channel given from another summary of the answer (one per
    day) counts as given."""
    from crow.chat.agent.checks import half_compared

    def summary(channel: str, **every: int) -> tuple[str, dict]:
        return "get_interaction_summary", {
            "channel": channel,
            "total_interactions": every[channel],
            "every_channel_same_period": every,
        }

    question = "web vs social yesterday, how many each?"
    small = [summary("web", web=94, social=7, cctv=0)]
    assert half_compared("**Web:** 94\n**Social:** 7", small, question) is None
    table = "| web | 13 |\n| social | 10 |\n| cctv | 4 |"
    by_day = [summary("web", web=13, social=10, cctv=4), summary("social", web=9, social=8)]
    assert half_compared(table, by_day[:1], "break down yesterday by channel, each") is None
    two_days = "web on november 27th vs social on november 28th, how many each?"
    assert half_compared("Web (Nov 27): 13. Social (Nov 28): 80.", by_day, two_days)
    days = [summary("web", web=13, social=10), summary("social", web=90, social=80)]
    assert half_compared("Web (Nov 27): 13. Social (Nov 28): 80.", days, two_days) is None
    assert "social (10)" in half_compared("Web: 13.", days, two_days)


def test_an_answer_corrected_for_another_problem_is_not_composed_for_one_side(demo):
    """Only an answer corrected for giving one side is composed when it gives one side
    again: one corrected for talk of a tool, which then answers "which is busier?" with the
    busier side's figure, is kept."""
    by = demo.analytics.interaction_summary("acme-outdoor")["by_channel"]
    busier = max(("web", "cctv"), key=by.__getitem__)
    answer = f"The {busier} is busier, with {by[busier]:,} interactions."
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="all"),
            AssistantTurn(text="I called get_interaction_summary for you."),
            AssistantTurn(text=answer),
        ]
    )
    result = run(Agent(model), ctx_for(demo), "web vs cctv, which is busier?")
    model.assert_complete()
    assert result.content == answer and result.fallback is None


def test_one_channels_count_for_a_question_about_all_gets_one_correction_round(demo):
    """Asked how many interactions there were on a day, a 1.5B counted the web and answered
    with its figure: the correction names the total of every channel; the total then
    stands. A follow-up to a channel's count, or a question with a word that may stand for a
    channel, is left alone."""
    import asyncio

    from models.messages import Message

    by = demo.analytics.interaction_summary("acme-outdoor")["by_channel"]
    total, web = sum(by.values()), f"There were {by['web']:,} interactions."
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="web"),
            AssistantTurn(text=web),
            AssistantTurn(text=f"There were {total:,} interactions."),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), "How many interactions did we have?")
    model.assert_complete()
    correction = model.calls[2].messages[-1].content
    assert f"all channels together had {total:,}" in correction and f"{by['web']:,}" in correction
    assert answer.content == f"There were {total:,} interactions." and answer.fallback is None

    follow_up = [
        Message.system("s"),
        Message.user("how many web interactions do we have?"),
        Message.assistant("The web had 12,345 interactions."),
        Message.user("and in the last week?"),
    ]
    for messages in (follow_up, [Message.system("s"), Message.user("how many store visits?")]):
        model = ScriptedChatModel(
            [call("get_interaction_summary", channel="web"), AssistantTurn(text=web)]
        )
        assert asyncio.run(Agent(model).run(messages, ctx_for(demo))).content == web
        model.assert_complete()


@pytest.mark.parametrize(
    "text",
    [
        "There are 2,140 web interactions.",
        "We have 1234 interactions since 2026.",
        "To count them, use the `get_interaction_summary` function with no filters.",
        '```json\n{"total_interactions": 3000}\n```',
        "",
        "The",  # cut off where it began to write a tool result out (blind29)
        "Our total is",
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


@pytest.mark.parametrize(
    ("message", "count"),
    [
        ("How many store visits did we get last month?", True),
        ("number of social posts about tents", True),
        ("Total online orders, please", True),
        ("How many products do we sell?", False),
        ("Show me recent complaints", False),
        ("How many interactions mention jackets?", True),
        ("How many interactions did our products get on the web?", True),
        ("top 4 products across the catalog by number of interactions?", False),
        ("how many people have signed up to the rewards club?", False),
    ],
)
def test_count_cues(message, count):
    from crow.chat.agent.cues import is_count_question

    assert is_count_question(message) is count


@pytest.mark.parametrize(
    ("text", "sent_back"),
    [
        ("549 interactions on the web channel from 2026-08-31 to 2026-11-28.", True),
        ("The site had **4,007** web visits.", True),
        ("The site had 4,007 web visits.", True),
        ("Hello! How can I help with your retail data?", False),
        ("The Arctic Down 0F costs $249 and has 12 reviews.", True),
        ("On 2026-11-28 interactions peaked.", True),
        ("The cost of expedited shipping is $10 per order.", True),
        ("A refund typically takes 7-10 business days.", True),
        ("Frozen food is kept at minus 18 degrees.", True),
        ("Customer service answers the phone from 9 am.", True),
        ("There are 14 stores.", True),
        ("No information provided.", True),
        ("No tools found.", True),
        ('get_org_context {"query": "custom cake notice"}', True),
        ("For that, you can search the company's knowledge base.", True),
        ("You can use me to explore your data, or search your products with me.", False),
        ("I can help with:\n1. Interaction counts\n2. Products\n3. Patterns", False),
        ("Good morning! I can answer 5 kinds of questions about your data.", False),
        ("Hi there! I'm CROW, your retail analytics assistant. How can I help?", False),
        ("To find them, you can use the search_interactions function.", True),
        ("The number of interactions on Instagram about rain jackets is 5.", True),
        ("I can count your interactions per channel.", False),
        ("No product named Sunny Acres Avocados 1kg found.", True),
        ("The email address is not provided in the given data.", True),
        ("I couldn't find any information about that.", True),
        ("You're welcome! Ask me anything about your data.", False),
        ("To find it, I'll search the company's knowledge base. It is open 24/7.", True),
        ("Let me check the catalog for that.", True),
        ("I will gladly help: what would you like to know?", False),
        ("I don't know the weather, but I can help with your retail data.", False),
        ("For pack sizes, you should consider the company's knowledge base.", True),
        ("To answer that, we need to look at the company's knowledge base for local farms.", True),
        ("I can look up your knowledge base, products and patterns.", False),
        ("The jackets one kicked off early at store 1.", True),
        ("I can tell you about 1 store or all of them.", False),
    ],
)
def test_an_answer_with_no_tool_behind_it_is_recognised(text: str, sent_back: bool) -> None:
    tools = ["get_interaction_summary", "search_interactions"]
    assert (unsourced_answer(text, tools) is not None) is sent_back


def test_the_asked_channels_figure_under_another_channels_name_is_corrected_to_the_asked(demo):
    """Asked "what about social" after a camera count, a 1.5B counted social and wrote its
    figure as the cameras'; told the cameras' figure, it answered with that. The correction
    names the figure as the social one, the channel asked about, and gives no other."""
    by = demo.analytics.interaction_summary("acme-outdoor")["by_channel"]
    social, cctv = by["social"], by["cctv"]
    earlier = f"There were {cctv:,} cctv interactions."
    right = f"There were {social:,} social interactions."
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="social"),
            AssistantTurn(text=f"{social:,} cctv interactions."),
            AssistantTurn(text=right),
        ]
    )
    chat = [
        Message.system("s"),
        Message.user("how many cctv interactions?"),
        Message.assistant(earlier),
        Message.user("what about social"),
    ]
    answer = asyncio.run(Agent(model).run(chat, ctx_for(demo)))
    model.assert_complete()
    correction = model.calls[2].messages[-1].content
    assert f"{social:,} is the social figure, the channel the question asks about" in correction
    assert f"{cctv:,}" not in correction
    assert answer.content == right and answer.fallback is None


def test_another_channels_figure_under_the_channel_asked_about_gets_one_correction_round(demo):
    """Asked "and on the web?" after a camera count, a 1.5B stated the cameras' figure (the
    summary's comparison line) as the web's: the correction names both figures, and the
    corrected answer stands. Answers that give the channel its own figure, set channels side
    by side or state a total pass unchanged."""
    by = demo.analytics.interaction_summary("acme-outdoor")["by_channel"]
    web, cctv, total = by["web"], by["cctv"], sum(by.values())
    wrong, right = f"{cctv:,} interactions on the web channel.", f"The web had {web:,}."
    model = ScriptedChatModel(
        [
            call("get_interaction_summary", channel="web"),
            AssistantTurn(text=wrong),
            AssistantTurn(text=right),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), "how many web interactions?")
    model.assert_complete()
    correction = model.calls[2].messages[-1].content
    assert f"{cctv:,} for web" in correction and f"web figure is {web:,}" in correction
    assert answer.content == right and answer.fallback is None

    for text in (
        f"## Web\n\n**{web:,}** interactions came in on the website.",
        f"- **Web:** {web:,}\n- **CCTV:** {cctv:,}",
        f"Online you had {web:,} of {total:,} interactions ({web / total:.0%}).",
        f"Across every channel, {total:,} interactions; the web is second.",
    ):
        model = ScriptedChatModel(
            [call("get_interaction_summary", channel="web"), AssistantTurn(text=text)]
        )
        answer = run(Agent(model), ctx_for(demo), "how many web interactions?")
        model.assert_complete()
        assert answer.fallback is None and answer.content == text


def test_a_pattern_answer_that_names_no_pattern_gets_one_correction_round(demo):
    """Asked about churn risk, a 1.5B answered "Yes, we are seeing a churn risk among
    customers." above a footnote to the pattern: the correction asks for the pattern's
    title; named, the answer stands; vague again, it is kept, never composed. Answers in a
    strong model's style (a bold title with its figures, a list of titles), one with a
    figure and no title, one saying there is none, and one resting on products beside the
    patterns pass unchanged."""
    question = "are we seeing any churn risk among customers?"
    ctx = dataclasses.replace(ctx_for(demo), question=question)
    output = asyncio.run(search_patterns(PatternArgs(query="churn risk"), ctx))
    found = [s.title for s in output.sources]
    vague = "Yes, we are seeing a churn risk among customers."
    counted = "There are 6 churn risks in the data."
    named = f"Yes: **{found[0]}** is the churn risk the analysis found."
    model = ScriptedChatModel(
        [
            call("search_patterns", query="churn risk"),
            AssistantTurn(text=vague),
            AssistantTurn(text=named),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), question)
    model.assert_complete()
    assert "says nothing the pattern search found" in model.calls[2].messages[-1].content
    assert answer.content.startswith(named) and answer.fallback is None

    rows = ScriptedChatModel(
        [
            call("search_patterns", query="churn risk"),
            AssistantTurn(text=counted),
            AssistantTurn(text=named),
        ]
    )
    assert run(Agent(rows), ctx_for(demo), question).content.startswith(named)
    rows.assert_complete()

    twice = ScriptedChatModel(
        [call("search_patterns", query="churn risk"), *[AssistantTurn(text=vague)] * 2]
    )
    kept = run(Agent(twice), ctx_for(demo), question)
    twice.assert_complete()
    assert kept.content.startswith(vague) and kept.fallback is None

    listed = "Detected patterns:\n" + "\n".join(
        f"- {t.lower()} (confidence 0.8)" for t in found[:3]
    )
    for calls, text in (
        ([call("search_patterns", query="churn risk")], listed),
        (
            [call("search_patterns", query="churn risk")],
            "No, none of the patterns is a churn risk.",
        ),
        ([call("search_patterns", query="churn risk")], "Yes: 31% of delivery customers lapsed."),
        (
            [call("search_patterns", query="churn risk"), call("search_products", query="tents")],
            "Yes, churn risk is up; the **Trailhead 2 Tent** is the product most affected.",
        ),
    ):
        model = ScriptedChatModel([*calls, AssistantTurn(text=text)])
        assert run(Agent(model), ctx_for(demo), question).content.startswith(text)
        model.assert_complete()


def test_the_pattern_a_ranking_put_first_is_named_or_corrected_once(demo):
    """Asked for the newest anomaly, a 1.5B named the right pattern in its own words, with a
    share from its finding, and the title only in the footnote: the correction names the
    title the search ranked first; named, the answer stands, and a strong model's answer
    naming it passes unchanged. "How sure are you about that one?" ranks nothing: its answer
    needs no title."""
    question = "what's the most recent anomaly we flagged?"
    ctx = dataclasses.replace(ctx_for(demo), question=question)
    newest = asyncio.run(search_patterns(PatternArgs(query="anomaly", sort="newest"), ctx))
    first = newest.content["ranked_first"]
    assert first == newest.sources[0].title and newest.sources[0].detail == "anomaly"
    # every word of the title, not the title ("a cart abandonment jump at the shipping step")
    own_words = f"The latest anomaly is the {first.lower().replace(' ', ' the ', 1)}, up 31%."
    named = f"The most recent anomaly is **{first}**, detected on {newest.content['patterns'][0]['detected']}."
    model = ScriptedChatModel(
        [
            call("search_patterns", query="anomaly", sort="newest"),
            AssistantTurn(text=own_words),
            AssistantTurn(text=named),
        ]
    )
    answer = run(Agent(model), ctx_for(demo), question)
    model.assert_complete()
    correction = model.calls[2].messages[-1].content
    assert f"ranked first is {first!r}" in correction
    assert answer.content.startswith(named) and answer.fallback is None

    strong = ScriptedChatModel(
        [
            call("search_patterns", query="anomaly", sort="newest"),
            AssistantTurn(text=f"## Latest anomaly\n\n- **{first}** (confidence 0.91)"),
        ]
    )
    assert run(Agent(strong), ctx_for(demo), question).content.startswith("## Latest anomaly")
    strong.assert_complete()

    # a strong model's writing of the title: partly bold, other hyphens, "and" for "&", &amp;
    from crow.chat.agent.unnamed import names_no_ranked

    outputs = [("search_patterns", {"ranked_first": "Out-of-stock spike in Health & Beauty"})]
    for written in (
        "The newest is the **Out-of-stock spike** in Health & Beauty (0.91).",
        "Newest: Out\u2011of\u2011stock spike in *Health and Beauty*.",
        "| Out-of-stock spike in Health &amp; Beauty | 0.91 |",
        "> Out-of-stock\nspike in Health & Beauty",
    ):
        assert names_no_ranked(written, outputs) is None, written
    assert names_no_ranked("An out-of-stock spike in Health.", outputs) is not None

    # sorted by detection on the model's own (a 1.5B sorts every pattern call so), for a
    # question that asks no recency: nothing is ranked, and a count of them stands
    count_ctx = dataclasses.replace(ctx_for(demo), question="how many anomalies did we detect?")
    counted = asyncio.run(search_patterns(PatternArgs(query="anomaly", sort="newest"), count_ctx))
    assert "ranked_first" not in counted.content

    how_sure = "how sure are you about that one?"
    sure_ctx = dataclasses.replace(ctx_for(demo), question=how_sure)
    topic = asyncio.run(search_patterns(PatternArgs(query=first), sure_ctx))
    assert "ranked_first" not in topic.content
    surest = dataclasses.replace(ctx_for(demo), question="which anomaly are we most sure of?")
    assert (
        "ranked_first" in asyncio.run(search_patterns(PatternArgs(query="anomaly"), surest)).content
    )
