"""The written line of a tool's result (``in_words``): its figures as an answer writes them,
led by what the user's question asks about. A small model copies this line more reliably
than it reads JSON rows; the call and the rows stay the model's."""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from crow.chat.agent.channel_cues import channels_named
from crow.chat.agent.context import ToolContext
from crow.chat.agent.cues import pattern_type_named
from crow.chat.agent.passages import closest
from crow.chat.agent.ranking_cues import (
    asks_confidence,
    asks_extreme,
    asks_least_confident,
    asks_newest,
    ranks_confidence,
)
from crow.chat.agent.tool_reads import day
from crow.retrieval.sort_order import PRICE_ORDER


def compared_lead(c: dict[str, Any], question: str) -> str:
    """The channels the question compares, first ("cameras or social? need both numbers"):
    given every channel's count, a 1.5B stated the total, or only the channel it had asked
    for."""
    counts = c.get("every_channel_same_period") or c["by_channel"]
    named = sorted(
        (ch for ch in channels_named(question) if ch in counts), key=lambda ch: -counts[ch]
    )
    if len(named) < 2:
        return ""
    figures = " and ".join(f"{ch} {counts[ch]:,} interactions" for ch in named)
    most = "more" if len(named) == 2 else "the most"
    return f"The channels asked about: {figures}; {named[0]} has {most}. "


def summary_in_words(c: dict[str, Any]) -> str:
    """The counts as a sentence with the figures as an answer writes them (a small model
    copies "20,000" correctly where it miswrites 20000), and the period they cover; the
    busiest and quietest channels where the result names them."""
    scope = f" on the {c['channel']} channel" if c.get("channel") else ""
    period = f" from {c['period']}" if c.get("period") else ""
    text = f"{c['total_interactions']:,} interactions{scope}{period}"
    counts = c.get("every_channel_same_period") or c["by_channel"]
    parts = ", ".join(f"{n:,} {ch}" for ch, n in counts.items())
    if c.get("channel") and any(counts.values()):
        everything = sum(counts.values())
        text += (
            f". Every channel in the same period, for comparison: {parts} ({everything:,} in all)"
        )
    elif any(counts.values()):
        text += f": {parts}"
    if c.get("busiest_channel"):  # with its figure: "our quietest channel?" was answered
        busiest, quietest = c["busiest_channel"], c["quietest_channel"]  # "social", no count
        text += (
            f"; busiest {busiest} ({counts[busiest]:,} interactions), "
            f"quietest {quietest} ({counts[quietest]:,} interactions)"
        )
    return text + "."


def product_in_words(p: dict[str, Any], priced: bool = False, counted: str = "interactions") -> str:
    """``counted``: what the product's figure counts ("social interactions since ...")."""
    described = f"; {p['attributes']}" if p.get("attributes") else ""
    if priced:  # asked what it costs, a 1.5B answered with the interactions
        return (
            f"{p['title']}: price {p['price']:,.2f} ({p['category']}, "
            f"{p['interactions']:,} {counted}{described})"
        )
    return (
        f"{p['title']} ({p['category']}): price {p['price']:,.2f}, "
        f"{p['interactions']:,} {counted}{described}"
    )


def products_in_words(
    rows: list[dict[str, Any]], sort: str, priced: bool = False, counted: str = "interactions"
) -> str:
    """The products as numbered text with their figures (a 1.5B reading JSON rows skipped
    the second of a ranking and answered a price question with the interactions)."""
    what = "customer interactions" if counted == "interactions" else counted
    lead = {
        "popularity": f"Ranked by {what}, most first: ",
        "cheapest": "Ranked by price, lowest first: ",
        "priciest": "Ranked by price, highest first: ",
    }.get(sort, "")
    if priced and sort not in PRICE_ORDER:  # those leads say it
        lead = f"Prices asked for. {lead}"
    return lead + "; ".join(
        f"{i}. {product_in_words(p, priced, counted)}" for i, p in enumerate(rows, start=1)
    )


RANKED_FIRST = "ranked_first"
"""The key of a pattern search's result that holds the title a ranking the question asks for
put first (Asked.ranked)."""


class Asked(NamedTuple):
    """The pattern a question asks about: why it is the one (the lead of the written line),
    the row, and whether a ranking the question asks for picked it (the newest, the most or
    least confident: its title is then the answer, unnamed.names_no_ranked)."""

    lead: str
    row: dict[str, Any]
    ranked: bool = False


async def pattern_asked(
    rows: list[dict[str, Any]], ctx: ToolContext, kind: str | None = None, newest: bool = False
) -> Asked:
    """The pattern the question asks about, and why: the most (or least) confident, asked how
    sure ("which anomaly are you most confident about?": a 1.5B named another of the six
    rows, 3 times of 3), else the one closest to the user's question (the model's query is
    often only the topic, and a 1.5B stated another row's store), or of those like it the
    largest (smallest) figure, asked for the biggest. `kind`: the kind of pattern a
    confidence question is about (pattern_search.confidence_kind). `newest`: the rows are
    the latest detected, and the first is the one asked about unless the question asks how
    sure."""
    if asks_confidence(ctx.question):
        of_kind = [p for p in rows if p["type"] == kind] or rows  # "which anomaly ...": of those
        least = asks_least_confident(ctx.question)
        lead = "Least confident" if least else "Most confident"
        top = (min if least else max)(of_kind, key=lambda p: p["confidence"])
        named = lead + (f" {kind}" if of_kind is not rows else "")
        return Asked(named, top, ranked=ranks_confidence(ctx.question))  # not "how sure?"
    if newest:
        lead = f"Most recently detected, on {day(rows[0]['detected_at'])}"
        return Asked(lead, rows[0], ranked=asks_newest(ctx.question))
    lead, top = "Closest to the question", await closest_pattern(rows, ctx)
    if (extreme := asks_extreme(ctx.question)) and (alike := extreme_alike(rows, top, extreme)):
        return Asked(*alike)
    return Asked(lead, top)


def patterns_in_words(rows: list[dict[str, Any]], lead: str) -> str:
    """The patterns as numbered text with their confidence, the first (the one the question
    asks about, pattern_asked) with its finding, after `lead`."""
    top = rows[0]
    found = f"{lead}: {top['title']} ({top['type']}, confidence {top['confidence']:.2f}): "
    return f"{found}{top['description']} All read: " + "; ".join(
        f"{i}. {p['title']} ({p['type']}, confidence {p['confidence']:.2f})"
        for i, p in enumerate(rows, start=1)
    )


async def closest_pattern(rows: list[dict[str, Any]], ctx: ToolContext) -> dict[str, Any]:
    """The pattern closest to the user's question (the first, without one), of the kind the
    question names if any was read: "which customer segments have been detected so far?"
    was closest to an anomaly's "shelf-gap detections" and answered with it."""
    kind = pattern_type_named(ctx.question)
    rows = [p for p in rows if p["type"] == kind] or rows
    if not ctx.question.strip() or len(rows) < 2:
        return rows[0]
    texts = [f"{p['title']}. {p['description']}" for p in rows]
    return rows[(await closest(ctx, ctx.question, texts))[0]]


_PERCENT = re.compile(r"(?<![\d.])(\d{1,6}(?:\.\d{1,3})?)\s?%")  # bounded: linear on any text


def _alike(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two patterns of one kind, told apart by their subject: of one type, with titles that
    open with the same two words ("Unusual queue lengths at Bend" / "... at Boulder") or open
    and close with the same word ("Lapsed Tents buyers" / "Lapsed Climbing buyers")."""
    x, y = a["title"].lower().split(), b["title"].lower().split()
    if not x or not y or a["type"] != b["type"]:
        return False
    return x[:2] == y[:2] or (x[0], x[-1]) == (y[0], y[-1])


def extreme_alike(
    rows: list[dict[str, Any]], top: dict[str, Any], extreme: str
) -> tuple[str, dict[str, Any]] | None:
    """Of the patterns like the one closest to the question, the one whose finding states the
    largest (or smallest) percentage: asked which store's queues grew most, a 1.5B named the
    row it was led with, not the one with the largest figure among the five it read."""
    alike = [
        (float(m.group(1)), p)
        for p in rows
        if _alike(p, top) and (m := _PERCENT.search(p["description"]))
    ]
    if len(alike) < 2:
        return None
    pick = max if extreme == "largest" else min
    _, row = pick(alike, key=lambda pair: pair[0])
    return f"{extreme.capitalize()} figure of {len(alike)} patterns like it", row
