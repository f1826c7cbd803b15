"""Argument grounding: drop filters the user never asked for.

Small models fill optional arguments from thin air (a channel, a date range copied from an
example, a pattern type). A filter stays only when the question itself says something of its
kind: a channel word, a time expression, a pattern type. Strong models rarely need this; it
is a setting (``agent.ground_arguments``), on for the CPU profile.
"""

from __future__ import annotations

import re
from typing import Any

_CHANNEL_WORDS = {
    "web": r"web|online|website|site|app|e-?commerce|digital|browser|cart|checkout page",
    "cctv": r"cctv|camera|cameras|footage|in-?store|store|stores|video|foot traffic|aisle|shelf",
    "social": r"social|instagram|twitter|tiktok|facebook|reddit|posts?|mentions?|tweets?",
}
_TIME = re.compile(
    r"\b(last|past|previous|recent(ly)?|latest|lately|today|yesterday|tonight|this (week|month|year|quarter)"
    r"|since|until|before|after|between|during|ago|\d{4}-\d{2}(-\d{2})?|\d{1,2}/\d{1,2}"
    r"|january|february|march|april|may|june|july|august|september|october|november|december"
    r"|week(end)?s?|month|quarter|year|days?|hours?)\b",
    re.I,
)
_PATTERN_TYPES = {
    "trend": r"trend", "anomaly": r"anomal|unusual|spike|outlier", "segment": r"segment",
    "seasonal": r"season", "churn-risk": r"churn|lapsed|at risk|leav", "affinity": r"affinit|bought with|also buy",
}  # fmt: skip


def _mentions(question: str, pattern: str) -> bool:
    return re.search(rf"\b({pattern})", question, re.I) is not None


_TIME_PHRASE = re.compile(
    r"\b((last|past|previous) (\d+ )?(hours?|days?|weeks?|months?|quarters?|years?)|yesterday|today|"
    r"this (week|month)|recent(ly)?|lately)\b",
    re.I,
)
_POPULAR = re.compile(
    r"\b(top|best|most popular|popular|best[- ]?sell\w*|top[- ]sell\w*|bestsellers?|most viewed)\b",
    re.I,
)
_TAKES = {
    "get_interaction_summary": {"channel", "since"},
    "search_interactions": {"channel", "since"},
    "search_patterns": {"since"},
}


def fill_arguments(
    tool: str, question: str, arguments: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """What the question states plainly but the call left out: one channel, one time span,
    ranking products by popularity."""
    takes, filled = _TAKES.get(tool, set()), dict(arguments)
    added = []
    if "channel" in takes and not filled.get("channel"):
        named = [ch for ch, words in _CHANNEL_WORDS.items() if _mentions(question, words)]
        if len(named) == 1:
            filled["channel"], added = named[0], [*added, "channel"]
    if tool == "search_products" and "sort" not in filled and _POPULAR.search(question):
        filled["sort"], added = "popularity", [*added, "sort"]
    unbounded = not filled.get("since") and not filled.get("until")
    if "since" in takes and unbounded and (m := _TIME_PHRASE.search(question)):
        filled["since"], added = m.group(1).lower(), [*added, "since"]
    return filled, added


def ground_arguments(question: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The arguments with unasked-for filters removed, and the names removed."""
    kept, dropped = dict(arguments), []
    channel = kept.get("channel")
    if channel and not _mentions(
        question, _CHANNEL_WORDS.get(str(channel), re.escape(str(channel)))
    ):
        dropped.append("channel")
    if (kept.get("since") or kept.get("until")) and not _TIME.search(question):
        dropped += [k for k in ("since", "until") if kept.get(k)]
    kind = kept.get("type")
    if kind and not _mentions(question, _PATTERN_TYPES.get(str(kind), re.escape(str(kind)))):
        dropped.append("type")
    for name in dropped:
        kept.pop(name, None)
    return kept, dropped
