"""Which interaction channels a question names, or asks about channel by channel."""

from __future__ import annotations

import re

_CHANNEL_WORDS = {
    "web": re.compile(r"\b(web|website|site|online|browser)\b", re.I),
    "cctv": re.compile(r"\b(cctv|cameras?|in[- ]store)\b", re.I),
    "social": re.compile(r"\b(social|instagram|tiktok|facebook|twitter)\b", re.I),
}


def channels_named(message: str) -> list[str]:
    """The interaction channels a question names, in the tools' words ("store cameras or
    social?" -> cctv, social)."""
    return [channel for channel, words in _CHANNEL_WORDS.items() if words.search(message)]


_EVERY_CHANNEL = re.compile(
    r"\b(?:by|per|each|(?<!across )every) (?:channel|source|platform)s?\b"
    r"|\bchannel (?:split|breakdown|mix)\b",
    re.I,
)


_CHANNEL_EXTREME = re.compile(
    r"\b(?:busiest|quietest|most|least|fewest|highest|lowest|biggest|smallest|top)\b", re.I
)


def asks_each_channel_only(message: str) -> bool:
    """A count asked channel by channel that asks for no busiest or quietest one ("break down
    interactions by channel", not "break it down by channel: which is busiest?")."""
    return asks_every_channel(message) and _CHANNEL_EXTREME.search(message) is None


def asks_every_channel(message: str) -> bool:
    """A count asked channel by channel ("break down interactions by channel", "per source",
    "channel split"); not a total "across every channel"."""
    return _EVERY_CHANNEL.search(message) is not None


# Words that may stand for a channel without naming one: "store visitors", "posts", "page views".
_CHANNEL_LIKE = re.compile(
    r"\b(stores?|shops?|visit\w*|foot|walk[- ]?ins?|floor|aisles?|posts?|mentions?|tweets?|"
    r"comments?|reviews?|pages?|views?|clicks?|apps?|e-?mails?|chats?|calls?|channels?|"
    r"digital|physical|offline|in[- ]person)\b",
    re.I,
)


def names_no_channel(message: str) -> bool:
    """A question that neither names a channel nor uses a word that could stand for one
    ("How many interactions did we have on November 30th?")."""
    return not channels_named(message) and _CHANNEL_LIKE.search(message) is None
