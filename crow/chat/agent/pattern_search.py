"""The pattern search tool: the detected patterns a query finds, with the one the question
asks about (the most confident of a kind, the largest or smallest figure of like patterns)
added when the query missed it, and led with in words."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crow.chat.agent.context import ToolContext
from crow.chat.agent.cues import (
    is_follow_up,
    names_no_subject,
    names_patterns,
    pattern_topic,
    pattern_type_named,
)
from crow.chat.agent.in_words import (
    RANKED_FIRST,
    closest_pattern,
    extreme_alike,
    pattern_asked,
    patterns_in_words,
)
from crow.chat.agent.product_words import topic_words
from crow.chat.agent.ranking_cues import (
    asks_confidence,
    asks_extreme,
    asks_least_confident,
    asks_newest,
    ranks_confidence,
)
from crow.chat.agent.sources import Source
from crow.chat.agent.tool import ToolOutput
from crow.chat.agent.tool_args import PatternArgs
from crow.chat.agent.tool_reads import MAX_ROWS, SNIPPET, day, noted, search, window
from indexes.filters import SearchFilter

if TYPE_CHECKING:
    from datetime import datetime


async def search_patterns(args: PatternArgs, ctx: ToolContext) -> ToolOutput:
    since, _ = await window(ctx, args.since, None)
    k = min(args.limit, MAX_ROWS)
    # a topic keeps its nearest patterns: the 1.5B wrote sort='newest' on every pattern call
    newest = args.sort == "newest" and names_no_subject(args.query)
    if newest:
        hits = await _newest(args, ctx, k, since)
    elif args.sort == "newest" and asks_newest(ctx.question):
        hits = await _newest_titled(args, ctx, k, since)
        newest = bool(hits)
    if not newest:
        flt = SearchFilter(pattern_type=args.type, since=since)
        hits = await search(ctx, "patterns", args.query, k, flt=flt)
    kind = confidence_kind(args, ctx)
    if kind or ranks_all(ctx.question):
        hits = await _with_the_surest(hits, kind, args.query, ctx, since)
    elif hits and not newest and (extreme := asks_extreme(ctx.question)):
        hits = await _with_the_extreme(hits, extreme, args.query, ctx, since)
    if hits:  # the one asked about first: a 1.5B stated the first row's store, not the lead's
        asked = await pattern_asked(hits, ctx, kind, newest)
        hits = [asked.row, *(h for h in hits if h is not asked.row)]
    rows = [
        {
            "id": h["id"],
            "type": h["type"],
            "title": h["title"],
            "description": h["description"][:SNIPPET],
            "detected": day(h["detected_at"]),
            "confidence": h["confidence"],
        }
        for h in hits
    ]
    content: dict[str, Any] = {"patterns": rows}
    if rows:
        content["in_words"] = patterns_in_words(rows, asked.lead)
        if asked.ranked:  # the answer is this title (unnamed.names_no_ranked)
            content[RANKED_FIRST] = asked.row["title"]
    return ToolOutput(
        noted(content, type=args.type, since=args.since),
        [Source(type="pattern", id=h["id"], title=h["title"], detail=h["type"]) for h in hits],
    )


async def _newest(
    args: PatternArgs, ctx: ToolContext, k: int, since: datetime | None
) -> list[dict[str, Any]]:
    """The latest detected patterns, newest first, of the kind the call, its query or else the
    question names: asked for the most recent pattern, a 1.5B searched "latest" by meaning
    and read six patterns detected months apart (3 misses in 80 blind questions). Only for a
    query of no subject (cues.names_no_subject)."""
    kind = args.type or pattern_type_named(args.query) or pattern_type_named(ctx.question)
    return await search(ctx, "patterns", "", k, flt=SearchFilter(pattern_type=kind, since=since))


async def _newest_titled(
    args: PatternArgs, ctx: ToolContext, k: int, since: datetime | None
) -> list[dict[str, Any]]:
    """For a question after the latest pattern of a topic ("what's the latest out-of-stock
    pattern?"), the patterns whose titles have each of the topic's words, newest first; none
    when no title has them (the topic then keeps its nearest by meaning). By meaning, a 1.5B
    read the topic's patterns in no order of detection and described one of them without
    its title; "evening rush" read an older evening rush first."""
    words = topic_words(pattern_topic(args.query))
    if not words:
        return []
    flt = SearchFilter(pattern_type=args.type, title_words=words, since=since)
    return await search(ctx, "patterns", "", k, flt=flt)


def confidence_kind(args: PatternArgs, ctx: ToolContext) -> str | None:
    """The kind of pattern whose most confident one the question asks for: named in the
    question, else in the call ("which one has the highest confidence?" after a list of
    trends, searched as "trend"), or in the question a follow-up follows ("and which one has
    the lowest confidence?" after the most confident seasonal pattern, searched as that
    pattern's title); None when the question asks no confidence. A question for the surest
    of all patterns (ranks_all) takes no kind from the query's words: asked "which detected
    pattern has the highest confidence?", a 1.5B searched "churn risks" and named the
    surest churn risk."""
    if not asks_confidence(ctx.question):
        return None
    if named := pattern_type_named(ctx.question):
        return named
    if ranks_all(ctx.question):
        return args.type
    before = pattern_type_named(ctx.earlier) if is_follow_up(ctx.question) else None
    return before or args.type or pattern_type_named(args.query)


def ranks_all(question: str) -> bool:
    """A question for the most (least) confident of all patterns, of no kind ("what's the
    pattern we're most confident about?": a 1.5B searched "likely patterns", read six rows
    without the surest, and answered "likely a seasonal effect")."""
    return ranks_confidence(question) and names_patterns(question) and not is_follow_up(question)


OF_A_KIND = 30  # patterns of one type read for the most confident (an org has under 20)
OF_ALL = 200  # every pattern, read for the most confident of all


async def _with_the_surest(
    hits: list[dict[str, Any]],
    kind: str | None,
    query: str,
    ctx: ToolContext,
    since: datetime | None,
) -> list[dict[str, Any]]:
    """The hits, with the most confident pattern of the kind the question names, or of all
    (the least confident, asked for that) added when the query did not find it: asked which
    anomaly it was most sure of, a 1.5B searched "unusual spikes", read six rows without the
    most confident anomaly, and named the best of those."""
    flt = SearchFilter(pattern_type=kind, since=since)
    of_kind = await search(ctx, "patterns", query, OF_A_KIND if kind else OF_ALL, flt=flt)
    if not of_kind:
        return hits
    pick = min if asks_least_confident(ctx.question) else max
    top = pick(of_kind, key=lambda h: h["confidence"])
    return hits if any(h["id"] == top["id"] for h in hits) else [*hits, top]


async def _with_the_extreme(
    hits: list[dict[str, Any]],
    extreme: str,
    query: str,
    ctx: ToolContext,
    since: datetime | None,
) -> list[dict[str, Any]]:
    """The hits, with the pattern that states the largest (or smallest) figure among those like
    the one closest to the question, added when the query did not find it: asked which
    store's evening rush grew most, a 1.5B read six of seven such trends, without the
    largest."""
    top = await closest_pattern(hits, ctx)
    flt = SearchFilter(pattern_type=top["type"], since=since)
    found = extreme_alike(await search(ctx, "patterns", query, OF_A_KIND, flt=flt), top, extreme)
    if found is None or any(h["id"] == found[1]["id"] for h in hits):
        return hits
    return [*hits, found[1]]
