"""What of the org's own data a question is nearest to: its closest product, detected pattern
and knowledge-base document (cosine). The guidance reads it to check the intent router, whose
examples know how questions are worded but not what this org holds: "what share of footwear
buyers come back for an accessory?" reads like a product question and restates a detected
pattern."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from crow.chat.agent.context import ToolContext
from crow.chat.agent.cues import compares_channels, is_count_question, is_ranking

COLLECTIONS = {
    "search_products": "products",
    "search_patterns": "patterns",
    "search_org_context": "org_context",
}

NEAR = 0.5
"""The nearest pattern or document is at least this close to the question, and"""
CLOSER = 0.12
"""... this much closer than the nearest item of the data the router's tool searches. On the
243 single-turn questions of the spent evaluation sets (all-MiniLM-L6-v2) this changed 5
routed tools, each to the expected one, and no other, with the bounds anywhere from 0.10 to
0.15 and 0.50 to 0.55. Products are never put in: a ranking ("which three bakery items do
shoppers engage with most?") is often nearer a pattern about interest than any product, so a
ranking's products are never taken out either."""


async def nearest_scores(ctx: ToolContext, question: str) -> dict[str, float]:
    """Each search tool's nearest item to the question: {tool name: cosine} (0 with no data)."""
    vector = await ctx.embed(question)
    found = await asyncio.gather(
        *(ctx.retriever.search(ctx.org_id, c, vector, k=1) for c in COLLECTIONS.values())
    )
    return {
        tool: float(hits[0].get("score") or 0.0) if hits else 0.0
        for tool, hits in zip(COLLECTIONS, found, strict=True)
    }


RESTATES = 0.6
"""A detected pattern this close to a question that asks for no number ("noticed anything
about how long people hang around the sleeping bag displays?", "is the social chatter about
jackets actually growing?") nearly restates it: the hint is the patterns' search, also where
the router read a count."""


def nearer_tools(tools: Sequence[str], scores: dict[str, float], question: str) -> tuple[str, ...]:
    """The router's tools, a search tool among them replaced by the patterns' or the knowledge
    base's search when the question is much nearer that data (NEAR, CLOSER), and a count
    that asks for no number by the patterns' search when a pattern restates it (RESTATES)."""
    if (
        tools == ("get_interaction_summary",)
        and scores.get("search_patterns", 0.0) >= RESTATES
        and not is_count_question(question)
        and not compares_channels(question)
    ):
        return ("search_patterns",)
    best = max(scores, key=lambda t: scores[t], default=None)
    if best is None or best == "search_products" or scores[best] < NEAR:
        return tuple(tools)
    out: list[str] = []
    for tool in tools:
        if (
            tool in scores
            and scores[best] - scores[tool] >= CLOSER
            and not (tool == "search_products" and is_ranking(question))
        ):
            tool = best
        if tool not in out:
            out.append(tool)
    return tuple(out)
