"""The five tools of the agent (crow.chat.agent.tool: name, description, typed arguments,
async invoke) and what each returns.

Results are compact JSON for the model; every row a tool returns also becomes a typed
Source, the only things the answer may footnote.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from crow.chat.agent.channel_cues import asks_each_channel_only
from crow.chat.agent.charts import products_chart, summary_charts
from crow.chat.agent.context import ToolContext
from crow.chat.agent.cues import (
    asks_again,
    asks_price,
    is_follow_up,
    split_clauses,
)
from crow.chat.agent.in_words import (
    compared_lead,
    product_in_words,
    products_in_words,
    summary_in_words,
)
from crow.chat.agent.passages import closest_sentences, with_next_sentences
from crow.chat.agent.pattern_search import search_patterns
from crow.chat.agent.product_rows import product_row
from crow.chat.agent.product_words import (
    category_asked,
    category_meant,
    category_named,
    names_no_topic,
    shares_no_word,
    topic_words,
)
from crow.chat.agent.sources import Source
from crow.chat.agent.titles import states_title
from crow.chat.agent.tool import Tool, ToolOutput
from crow.chat.agent.tool_args import (
    InteractionArgs,
    OrgContextArgs,
    PatternArgs,
    ProductArgs,
    SummaryArgs,
)
from crow.chat.agent.tool_reads import MAX_ROWS, SNIPPET, day, noted, search, window
from crow.retrieval.sort_order import PRICE_ORDER
from indexes.filters import SearchFilter

MEANT_POOL = 10  # products nearest a topic that name the category it means (product_words)


async def get_interaction_summary(args: SummaryArgs, ctx: ToolContext) -> ToolOutput:
    """With a channel, also every channel's count over the same period: "are cameras or
    social bigger?" is often called with one of the two, and the model then compared
    nothing (it answered with the one channel's count)."""
    since, until = await window(ctx, args.since, args.until)
    s = await ctx.analytics.interaction_summary(
        ctx.org_id, channel=args.channel, since=since, until=until
    )
    every = s
    if args.channel:
        every = await ctx.analytics.interaction_summary(ctx.org_id, since=since, until=until)
    # busiest first, and named: a small model does not compare figures reliably
    ranked = dict(sorted(every["by_channel"].items(), key=lambda kv: -kv[1]))
    content: dict[str, Any] = {"total_interactions": s["total"]}
    if args.channel:
        content |= {"channel": args.channel, "by_channel": {args.channel: s["total"]}}
        content["every_channel_same_period"] = ranked
    else:
        content["by_channel"] = ranked
    # Not for a count asked channel by channel: given them, a 1.5B answered "break down
    # interactions by channel" with these two (blind40), or with their names alone (blind42).
    if every["total"] and not asks_each_channel_only(ctx.question):
        content |= {"busiest_channel": next(iter(ranked)), "quietest_channel": [*ranked][-1]}
    if s["first_at"]:
        content["period"] = f"{day(s['first_at'])} to {day(s['last_at'])}"
    elif since or until:  # a window the data does not cover: a year guessed wrong, say
        data = await ctx.analytics.interaction_summary(ctx.org_id)
        if data["first_at"]:
            content["note"] = (
                f"No interactions in that period; the data runs from {day(data['first_at'])} "
                f"to {day(data['last_at'])}."
            )
    content["in_words"] = compared_lead(content, ctx.question) + summary_in_words(content)
    return ToolOutput(content, charts=summary_charts(s, args.channel))


async def search_products(args: ProductArgs, ctx: ToolContext) -> ToolOutput:
    """A query that names no topic ("top products", "our best sellers") ranks the whole
    catalog by interactions; one that names a catalog category ("tents", "most popular tents") ranks
    every product of it; another topic, ranked, every product named with its words ("milks":
    oat and whole milks), else (none named so) the products most like it. A channel or a time
    range counts only those interactions ("most talked about on social": a product's total
    ranks what the web's volume drives)."""
    query = "" if names_no_topic(args.query) else args.query
    k = min(args.limit, MAX_ROWS)
    since, until = await window(ctx, args.since, args.until)
    counted = SearchFilter(channel=args.channel, since=since, until=until)
    unit = _counted_in_words(counted)
    categories = await ctx.retriever.product_categories(ctx.org_id)
    # a query of no topic ranks the category the user's question names, if it names one
    category = (
        category_named(query, categories) if query else category_asked(ctx.question, categories)
    )
    if query and category is None and (args.sort == "popularity" or not counted.is_empty()):
        category = category_meant(query, await search(ctx, "products", query, MEANT_POOL))
    # every product of a category is as relevant to its name: they come most engaged-with
    # first (or by price, asked); only a ranking counts one channel's or period's interactions
    by_price = args.sort in PRICE_ORDER
    ranks = not query or category or not counted.is_empty()
    sort = args.sort if by_price or not ranks else "popularity"
    # a ranked topic ranks every product named with its words ("milk": the oat milks too, which
    # fell under the relevance floor of the nearest by meaning), else the nearest by meaning
    topic = topic_words(query) if query and category is None and sort != "relevance" else ()
    hits = []
    if category is not None:
        flt = SearchFilter(category=category)
        hits = await search(ctx, "products", "", k, flt=flt, sort=sort, counted=counted)
    elif topic:
        flt = SearchFilter(title_words=topic)
        hits = await search(ctx, "products", "", k, flt=flt, sort=sort, counted=counted)
    if not hits and category is None:
        topic = ()
        hits = await search(ctx, "products", query, k, sort=sort, counted=counted)
    named = await _named_products(ctx, query, hits, counted) if query and category is None else []
    ids = {h["id"] for h in named}
    rows = [product_row(h, described=h["id"] in ids) for h in hits]
    content: dict[str, Any] = {"products": rows, "sorted_by": sort}
    if not counted.is_empty():
        content["interactions_counted"] = unit
    priced = by_price or asks_price(ctx.question)
    if named and (len(named) > 1 or not hits or named[0]["id"] != hits[0]["id"]):
        said = [product_in_words(product_row(h, described=True), priced, unit) for h in named]
        content = {"product_named": " | ".join(said)} | content
        hits += [h for h in named if not any(h["id"] == hit["id"] for hit in hits)]
    if category:
        content["ranked"] = f"every {category} product" + (
            "" if query else " (the category the question names)"
        )
    elif topic:
        content["ranked"] = f"every product named with the words of {query!r}"
    elif (
        rows
        and not named
        and shares_no_word(query, [f"{r['title']} {r['category']}" for r in rows])
    ):
        content["note"] = (
            f"no product found has a word of '{query}' in its name or category: these are "
            "only the nearest by meaning (what the company offers beyond its catalog, its "
            "services and policies, is in search_org_context)"
        )
    if rows:
        content["in_words"] = products_in_words(rows, sort, priced, unit)
    return ToolOutput(
        content,
        [Source(type="product", id=h["id"], title=h["title"], detail=h["category"]) for h in hits],
        [products_chart(rows, unit)] if rows and sort == "popularity" else [],
    )


def _counted_in_words(counted: SearchFilter) -> str:
    """What a product's figure counts: "interactions", "social interactions since
    2026-11-01 before 2026-12-01"."""
    text = f"{counted.channel} interactions" if counted.channel else "interactions"
    if counted.since:
        text += f" since {day(counted.since)}"
    if counted.until:
        text += f" before {day(counted.until)}"
    return text


async def _named_products(
    ctx: ToolContext, query: str, hits: list[dict[str, Any]], counted: SearchFilter
) -> list[dict[str, Any]]:
    """The products whose titles the query is ("Daily Bake Sourdough Loaf Gluten-free"), or
    is made of ("X vs Y", "X and Y": a 1.5B searched both in one query, found the first and
    gave the second a price of its own), also when a ranking put more popular variants first
    or left them out (a 1.5B asked for one's price by popularity answered with the first
    row's)."""
    parts = [p for p in _TITLES_APART.split(query) if len(p.split()) >= 2]
    named: list[dict[str, Any]] = []
    for text in [query, *parts] if len(parts) >= 2 else [query]:
        key = _title_key(text)
        hit = next((h for h in hits if _title_key(h["title"]) == key), None)
        if hit is None:
            nearest = await search(ctx, "products", text, 1, counted=counted)
            hit = next((h for h in nearest if _title_key(h["title"]) == key), None)
        if hit is not None and all(h["id"] != hit["id"] for h in named):
            named.append(hit)
    # a title the user wrote in full names that product too: asked "is the Fresh Mart Select
    # Trail Mix Value Size local or imported?", a 1.5B searched "Select Trail Mix", read no
    # attributes and answered "local" (it is imported)
    for hit in hits:
        if states_title(ctx.question, hit["title"]) and all(h["id"] != hit["id"] for h in named):
            named.append(hit)
    return named


# each separator opens where a run of spaces does: linear on any text
_TITLES_APART = re.compile(
    r"(?<!\s)\s{1,3}(?:vs\.?|versus|and|or|&)\s+|(?<!\s)\s{0,3}[,;/]\s*", re.I
)


def _title_key(text: str) -> str:
    return " ".join(text.lower().split())


async def search_interactions(args: InteractionArgs, ctx: ToolContext) -> ToolOutput:
    since, until = await window(ctx, args.since, args.until)
    flt = SearchFilter(channel=args.channel, since=since, until=until)
    hits = await search(ctx, "interactions", args.query, min(args.limit, MAX_ROWS), flt=flt)
    rows = [
        {
            "id": h["id"],
            "channel": h["channel"],
            "date": day(h["occurred_at"]),
            "text": h["text"][:SNIPPET],
        }
        for h in hits
    ]
    return ToolOutput(
        noted({"interactions": rows}, channel=args.channel, since=args.since, until=args.until),
        [
            Source(type="interaction", id=h["id"], title=h["text"][:80], detail=h["channel"])
            for h in hits
        ],
    )


QUESTION_DOCUMENTS = 2  # what the user's question adds to a knowledge-base search, at most


async def _no_hits() -> list[dict[str, Any]]:
    return []


async def search_org_context(
    args: OrgContextArgs, ctx: ToolContext, *, chars: int = SNIPPET
) -> ToolOutput:
    """The documents the query finds (the first `chars` of each: the agent reads at least
    three, each token read costs a small model time) and the ones the user's question finds
    (a small model's query is often only a topic, and sometimes another one: "return policy"
    for a product recall), led by the sentence of their whole text that answers the
    question. A follow-up that asks the question before it again about another subject is
    read with it: asked "what about a kayak?" after the return window, a 1.5B searched
    "kayak" and read a paddling guide. One with a question of its own ("and what if the
    delivery is late?" after the delivery fee) is read alone: read with the fee question,
    it led with the fee."""
    question, earlier = ctx.question.strip(), ctx.earlier.strip()
    follow_up = bool(earlier) and is_follow_up(question) and asks_again(question)
    asked = f"{earlier} {question}" if follow_up else question
    by_query, by_question = await asyncio.gather(
        search(ctx, "org_context", args.query, args.limit),
        search(ctx, "org_context", asked, QUESTION_DOCUMENTS) if question else _no_hits(),
    )
    seen = {h["id"] for h in by_query}
    hits = by_query + [h for h in by_question if h["id"] not in seen]
    rows = [
        {
            "id": h["id"],
            "title": h["title"],
            "type": h["context_type"],
            "text": h["body"][:chars],
        }
        for h in hits
    ]
    found: dict[str, Any] = {"documents": rows}
    if rows and (target := question or args.query.strip()):
        # each part of a question in two, too, read with the whole ("how long do i have",
        # alone, is closest to the return window, not to the price drop the question is
        # about); a follow-up, with the question it follows
        parts = [(part, target) for part in split_clauses(target)]
        targets = [(target, earlier) if follow_up else target, *parts]
        bodies = [h["body"] for h in hits]
        sentences = with_next_sentences(await closest_sentences(ctx, targets, bodies), bodies)
        found = {"relevant_sentence": " ".join(sentences)} | found
    return ToolOutput(
        found,
        [
            Source(type="org_context", id=h["id"], title=h["title"], detail=h["context_type"])
            for h in hits
        ],
    )


TOOLS: tuple[Tool, ...] = (
    Tool(
        "get_interaction_summary",
        "Count customer interactions: the total and the breakdown per channel (web, cctv, "
        "social), optionally for one channel or a time range. Use it for every 'how many', "
        "'total', 'count' or 'breakdown' question about interactions; with no arguments it "
        "counts all of them.",
        SummaryArgs,
        get_interaction_summary,
    ),
    # No example of a kind: asked for "our most popular product", a 1.5B searched "tents",
    # the example this description gave.
    Tool(
        "search_products",
        "Find products in the catalog, each with its number of customer interactions. For the "
        "top, best-selling or most popular products use sort='popularity': with an empty "
        "query when the question names no kind of product (the whole catalog), else with the "
        "kind it names as the query; for the cheapest or most expensive, sort='cheapest' or "
        "'priciest'. channel, since and until rank by the interactions "
        "of one channel or period ('most popular on social last month').",
        ProductArgs,
        search_products,
    ),
    Tool(
        "search_interactions",
        "Find individual customer interactions: web visits, in-store camera (cctv) "
        "observations and social media posts, optionally by channel and time.",
        InteractionArgs,
        search_interactions,
    ),
    Tool(
        "search_patterns",
        "Find behavioral patterns detected in the interaction data: trends, anomalies, "
        "customer segments, seasonal effects, churn risks and product affinities. For the "
        "latest or most recently detected, sort='newest'.",
        PatternArgs,
        search_patterns,
    ),
    Tool(
        "search_org_context",
        "Search the company's own knowledge base: company profile, target market, mission "
        "and values, store locations and hours, competitors, return / shipping / privacy "
        "policies, loyalty program, services (such as repairs or custom orders) and category "
        "guides: anything about how the company works.",
        OrgContextArgs,
        search_org_context,
    ),
)
TOOLS_BY_NAME: dict[str, Tool] = {t.name: t for t in TOOLS}
