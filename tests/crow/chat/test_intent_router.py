"""The intent router: its cue words, its accuracy with the real MiniLM on the regression
set, and the guidance the loop gives with it (hints the model reads) or without it."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from crow.chat.agent.config import AgentConfig
from crow.chat.agent.cues import asked_part, is_count_question, split_clauses
from crow.chat.agent.guidance import EXAMPLES
from crow.chat.agent.intent import IntentRouter, Route, fit_softmax, refine
from crow.chat.agent.loop import Agent
from crow.services import ThreadProxy
from models.messages import AssistantTurn
from models.testing import ScriptedChatModel
from tests.agent_support import call, ctx_for, run
from tests.demo_env import build_demo_env
from tests.repo import ROOT

REGRESSION = ROOT / "benchmarks" / "regression_questions.jsonl"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return build_demo_env(tmp_path_factory.mktemp("var"))


def test_two_questions_in_one_request_are_split_into_clauses():
    assert split_clauses("How many web visits did we get, and what did people buy?") == [
        "How many web visits did we get",
        "what did people buy",
    ]
    assert split_clauses("Find tents and sleeping bags") == []  # one question, two things
    assert split_clauses("Which tent sells best? Also, where can I book a fitting?") == [
        "Which tent sells best",
        "where can I book a fitting",
    ]
    assert split_clauses("How many visits last week? also remind me, when do stores open?") == [
        "How many visits last week",
        "when do stores open",
    ]
    # typed without an apostrophe: "whats", "hows"
    assert split_clauses("how many cctv events this month? also whats the repair turnaround") == [
        "how many cctv events this month",
        "whats the repair turnaround",
    ]
    assert split_clauses("whats up, hows it going?") == []  # a greeting's two short parts


def test_cue_words_refine_what_the_examples_voted():
    # one question asking for a number: the summary answers it, not a search
    assert refine("How many web interactions last week?", {"interactions"}, []) == ("count",)
    # "find ... events" wants the events themselves
    assert refine("Find camera events at the Bend store", {"count"}, []) == ("interactions",)
    # patterns in a channel are patterns; patterns about popular products need both
    assert refine("Which trends show up in camera data?", {"interactions"}, []) == ("patterns",)
    assert refine("What patterns touch our best-selling kayaks?", {"products"}, []) == (
        "products",
        "patterns",
    )
    # a count of stores is the knowledge base's, not the summary's
    assert refine("How many stores do we have?", {"org"}, []) == ("org",)
    # a number of interactions on a named channel is the summary's, whatever the vote; a
    # number of days is a duration, not a count
    assert refine("how many social mentions did we get in october?", {"org"}, []) == ("count",)
    assert refine("how many days does delivery take for online orders?", {"org"}, []) == ("org",)
    # only patterns carry a confidence: a ranking by it ranks patterns, not products
    assert refine("which one has the highest confidence?", {"products"}, []) == ("patterns",)
    assert refine("Of the churn risks, which are you most confident about?", {"org"}, []) == (
        "patterns",
    )
    # a ranking of products is the product search's, however near the knowledge base is
    assert refine("what oat milk sells best for us?", {"org"}, []) == ("products",)
    assert refine("which two items get the most shopper interest?", {"patterns"}, []) == (
        "products",
    )
    # two channels side by side: the summary has both; a lookup of their posts is a search
    assert refine("Is CCTV or web traffic larger?", {"org"}, []) == ("count",)
    assert refine("did the cameras or social see more activity?", {"interactions"}, []) == (
        "count",
    )
    assert refine("What do web and social visitors say about tents?", {"interactions"}, []) == (
        "interactions",
    )
    # a policy that differs online and in store is still the knowledge base's
    assert refine("Is our return policy different online or in store?", {"org"}, []) == ("org",)


def test_a_ranking_keeps_the_other_question_of_a_split_request():
    """ "most popular X, and is there any Y?" asks two things: the ranking's cue words make
    its own question the product search's, not the other one's (the hint named products
    alone and the patterns were never read); "and what does it cost?" is about the ranked
    product, and "in dairy" is no question of its own."""
    q = "What's our best-selling cheese, and is there any detected shortage of it in stores?"
    parts = split_clauses(q)
    assert len(parts) == 2
    assert refine(q, {"products", "patterns"}, parts) == ("products", "patterns")
    q = "Which kayak is the most popular and what does it cost?"
    assert refine(q, {"products", "org"}, split_clauses(q)) == ("products",)
    q = "in dairy, which two items get the most shopper interest?"
    assert refine(q, {"products", "org"}, split_clauses(q)) == ("products",)


def test_a_question_of_a_split_request_about_patterns_keeps_it_beside_a_count():
    """ "web interactions in the past 2 wks? and is there some pattern about ...": the pattern
    question's words made the whole request a patterns question and the count was dropped.
    A request whose other part asks the knowledge base is a pattern question as before."""
    q = "web interactions in the past 2 wks? and is there some pattern about slot abandonment"
    parts = split_clauses(q)
    assert len(parts) == 2
    assert refine(q, {"count", "patterns"}, parts) == ("count", "patterns")
    q = "most popular jacket now? and are jacket buyers churning"
    assert refine(q, {"products", "patterns"}, split_clauses(q)) == ("products", "patterns")
    q = "Among the customer groups at risk of leaving us, which one has the highest confidence?"
    assert refine(q, {"org", "patterns"}, split_clauses(q)) == ("patterns",)
    assert refine("Which trends show up in camera data?", {"count"}, []) == ("patterns",)


def test_a_product_ranking_by_number_of_interactions_is_not_a_count():
    assert not is_count_question("top beverage by number of interactions pls")
    assert not is_count_question("top 4 products by number of interactions")
    assert is_count_question("which channel is top by number of interactions?")
    assert is_count_question("number of interactions on the web last week")
    # a count the examples voted for a ranking of products is the ranking's
    q = "what product got the most customer interactions this past week?"
    assert refine(q, {"count"}, []) == ("products",)


def test_a_statement_before_the_question_is_not_routed():
    """ "customer says their delivery came late, do they ..." was routed to the interaction
    search by "customer says"; a phrase that scopes the question stays ("Of all the jackets
    we carry, which ...")."""
    q = "customer says their delivery came late, do they get anything back for that?"
    assert asked_part(q) == "do they get anything back for that?"
    for kept in (
        "Of all the jackets we carry, which one do customers interact with the most?",
        "whats our most popular sleeping bag, and how much does demand climb?",
        "how many web visits last week, and what did people buy?",
        "tents, which is most popular?",
        "customer says their delivery came late. do they get anything?",
        # a head setting things side by side, or one the tail points back at, is the subject
        "web vs social in november, how many each?",
        "instagram versus tiktok mentions this month, which is higher?",
        "the store cameras and the website last week, how many for both?",
    ):
        assert asked_part(kept) == kept


@pytest.mark.real_model
def test_router_picks_the_regression_sets_tools_with_the_real_embedder():
    from models.embedder import SentenceTransformerEmbedder

    embedder = ThreadProxy(SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu"))
    questions = [json.loads(line) for line in REGRESSION.read_text().splitlines() if line]
    router = IntentRouter()

    async def route_all() -> list[Route]:
        return [await router.route(q["query"], embedder.embed) for q in questions]

    routes = asyncio.run(route_all())
    right = [
        sorted(r.tools) == sorted(q["expect_tools"]) for r, q in zip(routes, questions, strict=True)
    ]
    misses = [q["query"] for q, ok in zip(questions, right, strict=True) if not ok]
    assert len(questions) >= 30 and sum(right) / len(right) >= 0.9, misses
    greetings = [r for r, q in zip(routes, questions, strict=True) if q["kind"] == "greeting"]
    assert all(r.small_talk for r in greetings)


def test_the_regression_reaches_scikit_learns_optimum():
    """The router's softmax regression, fitted in numpy, is scikit-learn's logistic
    regression (same objective and C): the same penalized loss at the optimum."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    centers = rng.normal(size=(4, 16))
    y = rng.integers(0, 4, size=120)
    x = centers[y] + rng.normal(scale=1.5, size=(120, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    c = 4.0

    def loss(w: np.ndarray, b: np.ndarray) -> float:
        logits = x @ w + b
        logits -= logits.max(axis=1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return float(-c * log_p[np.arange(len(y)), y].sum() + 0.5 * (w**2).sum())

    ours = fit_softmax(x, y, 4, c, steps=600)
    ref = LogisticRegression(C=c, max_iter=5000, tol=1e-10).fit(x, y)
    theirs = loss(ref.coef_.T, ref.intercept_)
    assert loss(ours[:-1], ours[-1]) <= theirs * 1.001 + 1e-6
    assert (np.argmax(np.hstack([x, np.ones((120, 1))]) @ ours, axis=1) == ref.predict(x)).all()


class FixedRouter(IntentRouter):
    def __init__(self, route: Route | Exception) -> None:
        super().__init__()
        self.fixed = route

    async def route(self, question, embed):
        if isinstance(self.fixed, Exception):
            raise self.fixed
        return self.fixed


def agent_with(model, route) -> Agent:
    agent = Agent(model, AgentConfig(hints=True))
    agent.guidance.router = FixedRouter(route)
    return agent


def test_a_routed_small_talk_hint_leaves_the_tools_offered(demo):
    model = ScriptedChatModel([AssistantTurn(text="Hi! What would you like to know?")])
    answer = run(agent_with(model, Route(("chat",), 0.9)), ctx_for(demo), "Hey, good to see you")
    first = model.calls[0]
    assert first.params.tool_choice == "auto" and len(first.tools) == 5
    assert "without calling a tool" in first.messages[-1].content
    assert answer.tool_steps == [] and answer.sources == [] and "[1]" not in answer.content


@pytest.mark.parametrize("route", [Route((), 0.2), RuntimeError("embedder down")])
def test_an_unsure_or_failing_router_leaves_the_choice_to_the_model(demo, route):
    model = ScriptedChatModel([call("search_products", query="tent"), AssistantTurn(text="ok")])
    answer = run(agent_with(model, route), ctx_for(demo), "tents?")
    model.assert_complete()
    assert model.calls[0].params.tool_choice == "auto"
    assert [s["name"] for s in answer.tool_steps] == ["search_products"]


def test_the_hint_is_only_read_and_the_model_still_chooses(demo):
    model = ScriptedChatModel(
        [call("search_interactions", query="tents"), AssistantTurn(text="ok")]
    )
    agent = agent_with(model, Route(("products",), 0.7))
    answer = run(agent, ctx_for(demo), "tents?")
    first = model.calls[0]
    assert first.params.tool_choice == "auto" and len(first.tools) == 5
    assert first.messages[-1].role == "system" and "search_products" in first.messages[-1].content
    assert [s["name"] for s in answer.tool_steps] == ["search_interactions"]


@pytest.mark.parametrize("hints", [True, False])
def test_examples_join_the_system_prompt_only_with_hints(demo, hints):
    """One system prompt either way (a prompt cache keeps covering it); hints off: as sent."""
    model = ScriptedChatModel([AssistantTurn(text="Hello!")])
    agent = agent_with(model, Route(("chat",), 0.9)) if hints else Agent(model)
    run(agent, ctx_for(demo), "hi")
    messages = model.calls[0].messages
    assert messages[0].role == "system" and (EXAMPLES in messages[0].content) is hints
    assert [m.role for m in messages].count("system") == (2 if hints else 1)


def test_the_examples_name_no_catalog_topic_a_model_could_copy(demo):
    """A 1.5B copied an example's "backpacks" into a grocer's product search: examples use
    X for whatever the question names."""
    import duckdb

    with duckdb.connect() as con:
        categories = {
            c.lower()
            for org in ("acme-outdoor", "fresh-mart")
            for (c,) in con.execute(
                "SELECT DISTINCT category FROM read_parquet(?)",
                [demo.lake.parquet_glob(org, "products")],
            ).fetchall()
        }
    words = {w.strip("?!.,\"'").lower() for w in EXAMPLES.split()}
    assert categories and not {c for c in categories if c in words or c.rstrip("s") in words}


class RecordingRouter(IntentRouter):
    def __init__(self, route: Route) -> None:
        super().__init__()
        self.fixed, self.asked = route, []

    async def route(self, question, embed):
        self.asked.append(question)
        return self.fixed


def test_a_follow_up_is_routed_with_the_question_it_follows(demo):
    from crow.chat.agent.guidance import Guidance
    from models.messages import Message

    guidance = Guidance(timeout_s=5)
    guidance.router = router = RecordingRouter(Route(("count",), 0.8))
    earlier = "How many CCTV interactions do we have?"
    conversation = [
        Message.system("prompt"),
        Message.user(earlier),
        Message.assistant("5,925 CCTV interactions."),
        Message.user("And on the web?"),
    ]
    out = asyncio.run(guidance.apply(conversation, ctx_for(demo))).messages
    # it only swaps the channel: the earlier question, asked again, is what is routed
    assert router.asked == [earlier]
    hint = out[-1].content
    assert out[-1].role == "system" and "a follow-up to the previous question" in hint
    assert "get_interaction_summary" in hint and "CCTV" not in hint
    # what it asks about in the earlier question's place, in the user's words
    assert 'again, about "on the web" in place of what it asked' in hint
    # a follow-up with a question of its own is routed with the question it follows
    conversation[-1] = Message.user("And how many were on the web?")
    router.asked.clear()
    out = asyncio.run(guidance.apply(conversation, ctx_for(demo))).messages
    assert router.asked == [f"{earlier} And how many were on the web?"]
    assert "in place of" not in out[-1].content
    # a few words about "it" ask about the earlier question's subject: routed as it
    conversation[-1] = Message.user("what does it cost?")
    router.asked.clear()
    asyncio.run(guidance.apply(conversation, ctx_for(demo)))
    assert router.asked == [earlier]
    # a question that stands on its own is routed alone, whatever came before
    conversation[-1] = Message.user("Which tents are most popular?")
    router.asked.clear()
    out = asyncio.run(guidance.apply(conversation, ctx_for(demo))).messages
    assert router.asked == ["Which tents are most popular?"]
    assert "follow-up" not in out[-1].content


@pytest.mark.parametrize(
    ("question", "follows"),
    [
        ("And on the web?", True),
        ("What about social media?", True),
        ("Which of those came from Instagram?", True),
        ("the delivery slot one - how much did it go up by?", True),
        ("what's the price of the top one?", True),
        ("ok and if the stuff that went off came from a home delivery?", True),
        ("what does it cost?", True),
        ("is it in stock?", True),
        ("do basecamp members get any discount on that?", True),  # ends on what came before
        ("does that apply to kayaks too?", True),  # the question before, about kayaks
        ("does the same window apply to kayaks?", True),
        ("is it any different for sale items?", True),
        ("Which of our stores sells the most of that?", True),
        ("What did customers say about that jacket on social?", False),
        ("Is there one store open on Sundays?", False),
        ("How many web interactions did we have?", False),
        ("Which tents are most popular?", False),
        ("What are they saying about our return policy and how long does it take us?", False),
        ("How long does it take to ship a kayak to Denver?", False),
    ],
)
def test_follow_up_cues(question, follows):
    from crow.chat.agent.cues import is_follow_up

    assert is_follow_up(question) is follows


@pytest.mark.parametrize(
    ("question", "substitutes"),
    [
        ("what about kayaks?", True),
        ("And on the web?", True),
        ("ok and if it came by home delivery?", True),
        ("ok and what about kayaks and paddleboards, same window?", True),
        ("And how about the cameras?", True),
        ("does that apply to kayaks too?", True),
        ("would the same go for gift cards?", True),
        ("does the same window apply to kayaks?", True),
        ("and does the same window apply to kayaks?", True),
        ("and does that apply to kayaks?", True),
        ("is it different for bikes or kayaks?", True),
        ("and is that the same for gift cards?", True),
        ("are those any different with a coupon?", True),
        ("is it different for how many items?", False),  # asks a question of its own
        ("is it different from the web count?", False),  # compares, names no new subject
        ("is the same coupon valid online?", False),
        ("do those items count for points?", False),
        ("does that coupon work for online orders?", False),
        ("and how much is it?", False),
        ("does the store apply discounts?", False),
        ("and which one has the highest confidence?", False),
        ("Which of those were on Instagram?", False),
        ("Andrew asked about tents", False),
    ],
)
def test_a_follow_up_that_only_swaps_what_it_asks_about(question, substitutes):
    from crow.chat.agent.cues import only_substitutes

    assert only_substitutes(question) is substitutes


@pytest.mark.parametrize(
    ("question", "swapped"),
    [
        ("and october?", "october"),
        ("ok and in household?", "in household"),
        ("does the same window apply to kayaks?", "kayaks"),
        ("is it different for bikes or kayaks?", "bikes or kayaks"),
        ("What about social media?", "social media"),
        ("same for?", ""),
        ("and how much is it?", None),
    ],
)
def test_what_a_follow_up_asks_about_in_place_of_the_earlier_subject(question, swapped):
    from crow.chat.agent.cues import substitute

    assert substitute(question) == swapped


@pytest.mark.parametrize(
    ("question", "quoted"),
    [
        ("and  in\x0bmay?", 'about "in may" in place'),
        ('and "frozen"?', 'about "frozen" in place'),
        ('and the "deluxe" one?', "about \"the 'deluxe' one\" in place"),
        ("and " + "x" * 4000 + "?", ""),  # two words, one of them a paragraph long
        ("and in may\x00?", ""),
        ("and how many in may?", ""),
    ],
)
def test_the_hint_quotes_a_few_printable_words_only(question, quoted):
    from crow.chat.agent.guidance import _asked_again

    hint = _asked_again(question)
    assert (quoted in hint) if quoted else hint == ""


@pytest.mark.parametrize(
    ("question", "confidence", "least", "ranked"),
    [
        ("which anomaly pattern has the lowest confidence?", True, True, True),
        ("which anomaly pattern has the lowest confidnce?", True, True, True),  # misspelled
        ("which trend are we most confident about?", True, False, True),
        ("What's the pattern we're most confident about?", True, False, True),
        ("how sure are you about that churn pattern?", True, False, False),
        ("what's the conference schedule?", False, False, False),
        ("which products are configured for pickup?", False, False, False),
    ],
)
def test_confidence_cues(question, confidence, least, ranked):
    """A confidence question leads the pattern results with the most (or least) confident;
    "lowest confidnce" was read as none and answered with the most confident anomaly. One that
    ranks ("most", "lowest") is told from one asking how sure a finding is."""
    from crow.chat.agent.ranking_cues import (
        asks_confidence,
        asks_least_confident,
        ranks_confidence,
    )

    assert asks_confidence(question) is confidence
    assert asks_least_confident(question) is least
    assert ranks_confidence(question) is ranked


def test_a_question_the_knowledge_base_nearly_restates_gets_the_knowledge_base_hint(demo):
    """The router's examples know how questions are worded, the org's knowledge base what it
    holds: a question one of its sentences nearly restates is hinted to the knowledge base,
    whatever the router voted ("How many local farms do we buy from?" read as a count). A
    question the knowledge base does not restate keeps the router's reading, and a failing
    knowledge-base search leaves the hint to the router alone."""
    from crow.chat.agent.guidance import Guidance

    guidance = Guidance(timeout_s=5)
    guidance.router = RecordingRouter(Route(("count",), 0.8))
    # the tests' hash embedder matches words: a question in the words of the return policy
    restated = "Must bikes, kayaks and paddleboards be returned unused within 30 days?"
    hint = asyncio.run(guidance.hint(restated, ctx_for(demo))).text
    assert "search_org_context" in hint and "get_interaction_summary" not in hint
    hint = asyncio.run(guidance.hint("How many web interactions last week?", ctx_for(demo))).text
    assert "get_interaction_summary" in hint and "search_org_context" not in hint

    class Broken:
        async def search(self, *args, **kwargs):
            raise RuntimeError("index is being built")

    hint = asyncio.run(guidance.hint(restated, ctx_for(demo, retriever=Broken()))).text
    assert "get_interaction_summary" in hint and "search_org_context" not in hint


def test_the_small_model_is_not_offered_the_pattern_type_or_date_filters():
    """Hints narrow what the small model may write (no pattern type filter: a pattern's type
    is in the text its search embeds; no detection date: a pattern question's time words
    tell what it found); without hints every argument is offered."""
    specs = {
        hints: {
            s.name: s.parameters["properties"] for s in Agent(None, AgentConfig(hints=hints)).specs
        }
        for hints in (True, False)
    }
    assert set(specs[True]["search_patterns"]) == {"query", "sort", "limit"}
    assert {"type", "since"} <= set(specs[False]["search_patterns"])
    assert {k: v for k, v in specs[True].items() if k != "search_patterns"} == {
        k: v for k, v in specs[False].items() if k != "search_patterns"
    }


@pytest.mark.parametrize(
    ("tools", "scores", "question", "hinted"),
    [
        # a finding worded like a product question: the patterns restate it
        (
            ("products",),
            (0.44, 0.66, 0.44),
            "What share of footwear buyers buy accessories?",
            ("patterns",),
        ),
        # a knowledge-base fact beside a product topic: one tool
        (
            ("products", "org"),
            (0.48, 0.32, 0.63),
            "What R-value should a pad have?",
            ("org",),
        ),
        (
            ("org",),
            (0.15, 0.61, 0.41),
            "What share of late-order customers left?",
            ("patterns",),
        ),
        # a ranking near a pattern about interest keeps its products
        (
            ("products",),
            (0.41, 0.55, 0.31),
            "which navigation product is most looked at?",
            ("products",),
        ),
        # not near enough, or not clearly nearer: the router's reading stands
        (("products",), (0.30, 0.45, 0.20), "What do shoppers pair with coffee?", ("products",)),
        (("org",), (0.30, 0.60, 0.52), "How long do refunds take?", ("org",)),
        # a count that asks for no number, restated by a pattern, is the pattern's
        (
            ("count",),
            (0.40, 0.62, 0.35),
            "noticed anything about how long people linger at the tent displays?",
            ("patterns",),
        ),
        (("count",), (0.40, 0.62, 0.35), "How many visits did the tent displays get?", ("count",)),
        (("count",), (0.40, 0.55, 0.35), "anything about the tent displays?", ("count",)),
        # products are never put in, and other tools are left alone
        (("org",), (0.80, 0.30, 0.40), "Price of the Alpine Tent?", ("org",)),
        (
            ("count", "products"),
            (0.20, 0.70, 0.30),
            "How many visits, and which tents?",
            ("count", "patterns"),
        ),
    ],
)
def test_a_routed_search_tool_is_checked_against_the_data_the_question_is_nearest(
    tools, scores, question, hinted
):
    from crow.chat.agent.intent_examples import INTENT_TOOLS
    from crow.chat.agent.nearest import COLLECTIONS, nearer_tools

    by_tool = dict(zip(COLLECTIONS, scores, strict=True))
    names = tuple(INTENT_TOOLS[t] for t in tools)
    assert nearer_tools(names, by_tool, question) == tuple(INTENT_TOOLS[t] for t in hinted)


def test_the_hint_names_the_tool_of_the_data_a_question_restates(demo):
    """With the real index of the demo's patterns (the tests' embedder matches words), a
    question in a detected pattern's words that the router reads as products is hinted to the
    patterns; a failing search leaves the router's reading."""
    import duckdb

    from crow.chat.agent.guidance import Guidance

    with duckdb.connect() as con:
        (description,) = con.execute(
            "SELECT description FROM read_parquet(?) WHERE type = 'affinity' LIMIT 1",
            [demo.lake.parquet_glob("acme-outdoor", "patterns")],
        ).fetchone()
    guidance = Guidance(timeout_s=5)
    guidance.router = RecordingRouter(Route(("products",), 0.8))
    question = f"Is it true that {description.rstrip('.')}?"
    hint = asyncio.run(guidance.hint(question, ctx_for(demo))).text
    assert "call search_patterns." in hint
    # a follow-up is checked with the question it follows, as it is routed
    hint = asyncio.run(
        guidance.hint("And how strong is that one?", ctx_for(demo), earlier=question)
    ).text
    assert "a follow-up" in hint and "call search_patterns." in hint

    class Broken:
        async def search(self, *args, **kwargs):
            raise RuntimeError("index is being built")

    hint = asyncio.run(guidance.hint(question, ctx_for(demo, retriever=Broken()))).text
    assert "call search_products." in hint


def first_document_sentence(demo) -> str:
    """The first sentence of the demo org's first document."""
    import duckdb

    with duckdb.connect() as con:
        (body,) = con.execute(
            "SELECT body FROM read_parquet(?) LIMIT 1",
            [demo.lake.parquet_glob("acme-outdoor", "documents")],
        ).fetchone()
    return body.split(". ")[0].rstrip(".")


def test_a_part_the_knowledge_base_restates_adds_it_to_the_hint(demo):
    """Of two questions in one request, one the knowledge base restates: the router reads the
    whole as the other's (a ranking), and the hint names both tools, as calls of one reply."""
    from crow.chat.agent.guidance import Guidance

    sentence = first_document_sentence(demo)
    guidance = Guidance(timeout_s=5)
    guidance.router = RecordingRouter(Route(("products",), 0.8))
    alone = asyncio.run(guidance.hint("Which tent is our most popular?", ctx_for(demo))).text
    assert alone.endswith("call search_products.")
    both = f"Which tent is our most popular, and is it true that {sentence}?"
    hint = asyncio.run(guidance.hint(both, ctx_for(demo))).text
    assert "call search_products and search_org_context (it asks 2 things" in hint


def test_a_part_of_a_request_needs_a_less_close_knowledge_base_match(demo, monkeypatch):
    """A clause is short and its nearest knowledge-base sentence less close than a whole
    question's: at 0.62 ("... and remind me what the minimum order is for free delivery"), a
    part adds the knowledge base to the hint, a whole question keeps the router's reading."""
    from crow.chat.agent import guidance as guidance_module

    async def match(ctx, text):
        return 0.62

    monkeypatch.setattr(guidance_module, "knowledge_base_match", match)
    guidance = guidance_module.Guidance(timeout_s=5)
    guidance.router = RecordingRouter(Route(("products",), 0.8))
    whole = "what's the minimum order for free delivery?"
    assert asyncio.run(guidance.hint(whole, ctx_for(demo))).tools == ("search_products",)
    both = (
        "what's the top selling household product, and what's the minimum order for free delivery?"
    )
    hint = asyncio.run(guidance.hint(both, ctx_for(demo)))
    assert hint.tools == ("search_products", "search_org_context")


def test_a_count_on_a_named_channel_is_not_hinted_to_the_knowledge_base(demo):
    """The org's profile names the org and its channels, so "how many social mentions did
    <org> get?" can come near it; a number of interactions on a channel is still a count."""
    from crow.chat.agent.guidance import Guidance

    sentence = first_document_sentence(demo)
    guidance = Guidance(timeout_s=5)
    guidance.router = RecordingRouter(Route(("count",), 0.8))
    about = asyncio.run(guidance.hint(f"Is it true that {sentence}?", ctx_for(demo))).text
    assert "search_org_context" in about  # the sentence alone is the knowledge base's
    question = f"How many social interactions said {sentence}?"
    hint = asyncio.run(guidance.hint(question, ctx_for(demo))).text
    assert hint.endswith("call get_interaction_summary.")
