"""A follow-up's search that repeats the conversation and leaves out what the follow-up asks.

Asked "ok and in household?" after "what's the top frozen product?", a 1.5B searched the
products for "Frozen Berries Mini", the earlier answer's product, and answered with it again
(blind32, blind34, blind35: 3 of the 4 such follow-ups in the spent sets). Such a call is not
run: its result tells the model what the follow-up asks about (crow.chat.agent.runner). Over
every follow-up row of the stored evaluation runs, the calls this flags were all in answers
graded wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from crow.chat.agent.cues import channels_named, substitute
from crow.chat.agent.product_words import stems
from crow.data.timewords import TimeWordError, resolve

# Words that point back or rank ("the other one", "the cheapest"): what they ask for is in
# the conversation or in the call's sort, not in its query.
_NOT_A_SUBJECT = stems(
    "the that this those these one ones other others rest same them first second third last "
    "next previous and for with about from just only top most least best worst popular "
    "cheapest cheaper priciest pricier expensive cheap"
)


def _words(text: str) -> set[str]:
    return {w for w in stems(text) if len(w) >= 3}


def _is_time(text: str) -> bool:
    try:
        resolve(text, datetime.now(UTC))
    except TimeWordError:
        return False
    return True


def left_out_subject(arguments: Mapping[str, Any], question: str, earlier: Sequence[str]) -> str:
    """What a follow-up asks about in place of what the question before it asked ("in
    household"), when a search call's query is made only of the earlier conversation's words
    and none of the call's arguments say it; "" for any other call."""
    query = arguments.get("query")
    subject = substitute(question) or ""
    if not isinstance(query, str) or not subject or _is_time(subject):
        return ""
    wanted = _words(subject) - _NOT_A_SUBJECT
    said = " ".join(str(v) for v in arguments.values() if v is not None)
    if (
        not wanted
        or wanted & _words(said)
        or set(channels_named(subject)) & {arguments.get("channel")}
    ):
        return ""
    repeats = _words(query) <= set().union(set(), *map(_words, earlier))
    return subject if repeats else ""
