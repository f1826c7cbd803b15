"""The cue-word vocabulary: small talk, count questions, product queries without a topic.

Read by the intent router's refinement (crow.chat.agent.intent), whose reading reaches the model
as a hint, by the products tool (a query that names no topic ranks the whole catalog) and by
the scripted test models; nothing here decides which tool is called.
"""

from __future__ import annotations

import re

_SMALL_TALK = re.compile(
    r"^\W*(hi|hello|hey|hiya|howdy|yo|greetings|good (morning|afternoon|evening|day)|"
    r"thanks?( you)?( so much| a lot)?|thank you|thx|cheers|ok(ay)?|cool|great|nice|bye|goodbye|"
    r"see you|how are you( doing)?|how's it going|what's up|who are you|what can you do|"
    r"what are you|help)\b[\s\w,!.?']{0,30}$",
    re.I,
)
_DATA_WORDS = re.compile(
    r"\b(how many|count|total|number|interactions?|products?|sales|sell|customers?|patterns?|"
    r"trends?|web|cctv|camera|social|store|stores|policy|polic(y|ies)|company|market|"
    r"competitors?|show|find|list|search|top|best|recent|last|week|month)\b",
    re.I,
)


def is_small_talk(message: str) -> bool:
    text = message.strip()
    return len(text) <= 60 and bool(_SMALL_TALK.match(text)) and not _DATA_WORDS.search(text)


_WORD = r"[\w&'-]+"
_FOLLOW_UP = re.compile(
    r"^\W*(and|also|only|just|what about|how about|same for)\b|\b(those|these|them|they)\b"
    # "the jackets one", "the delivery slot one": up to three words, spelled out (no nesting)
    rf"|\bthe {_WORD} one\b|\bthe {_WORD} {_WORD} one\b|\bthe {_WORD} {_WORD} {_WORD} one\b",
    re.I,
)


def is_follow_up(message: str) -> bool:
    """A short question that leans on the one before it ("And on the web?", "Which of those
    ...?", "the jackets one - which store?"): read alone, it lacks the topic or the filters
    it keeps."""
    return len(message.split()) <= 12 and bool(_FOLLOW_UP.search(message))


_COUNT = re.compile(
    r"\b(how many|number of|count|total|totals|breakdown|how much traffic|tally)\b", re.I
)
_NOT_INTERACTIONS = re.compile(
    r"\b(products?|items?|skus?|patterns?|stores|locations?|employees?|members?|documents?|"
    r"signed up|enrolled|subscribers?)\b",
    re.I,
)


_RANKS = re.compile(r"\b(top|most|least|best|worst|rank\w*|popular)\b", re.I)


def is_ranking(message: str) -> bool:
    """A question that ranks ("top 3", "most popular", "which sells best")."""
    return _RANKS.search(message) is not None


def is_count_question(message: str) -> bool:
    """A question asking for a number of interactions (not of products, stores, ...): also
    "how many interactions did tents get", but not "top 4 products by number of
    interactions", which ranks products."""
    if not _COUNT.search(message):
        return False
    if not _NOT_INTERACTIONS.search(message):
        return True
    return re.search(r"\binteractions?\b", message, re.I) is not None and not is_ranking(message)


_NO_TOPIC = frozenset(
    [
        "a",
        "all",
        "any",
        "are",
        "best",
        "bestselling",
        "best-selling",
        "catalog",
        "catalogue",
        "current",
        "currently",
        "do",
        "goods",
        "in",
        "is",
        "items",
        "item",
        "list",
        "most",
        "of",
        "our",
        "overall",
        "popular",
        "popularity",
        "product",
        "products",
        "rank",
        "ranked",
        "right",
        "now",
        "sell",
        "seller",
        "sellers",
        "selling",
        "sells",
        "sold",
        "the",
        "these",
        "this",
        "top",
        "we",
        "what",
        "which",
    ]
)


def names_no_topic(query: str) -> bool:
    """A product query made only of words like "top", "best selling", "our products": it asks
    for the whole catalog's ranking, not for products about something."""
    words = re.findall(r"[a-z][a-z-]*", query.lower())
    return all(w in _NO_TOPIC for w in words)


_CATEGORY_FILLER = frozenset(["and", "category", "equipment", "food", "foods", "gear", "range"])


def _stems(text: str) -> set[str]:
    words = re.findall(r"[a-z]+", text.lower())
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words}


_NO_TOPIC_STEMS = _stems(" ".join(_NO_TOPIC)) | _CATEGORY_FILLER


def category_named(query: str, categories: list[str]) -> str | None:
    """The one catalog category a product query names and nothing more ("tents", "dairy
    products", "our best-selling backpack"), or None ("rain jackets", "frozen pizza")."""
    wanted = _stems(query) - _NO_TOPIC_STEMS
    if not wanted:
        return None
    named = [c for c in categories if wanted <= _stems(c) - _CATEGORY_FILLER]
    return named[0] if len(named) == 1 else None


_CHANNEL_WORDS = {
    "web": re.compile(r"\b(web|website|site|online|browser)\b", re.I),
    "cctv": re.compile(r"\b(cctv|cameras?|in[- ]store)\b", re.I),
    "social": re.compile(r"\b(social|instagram|tiktok|facebook|twitter)\b", re.I),
}


def channels_named(message: str) -> list[str]:
    """The interaction channels a question names, in the tools' words ("store cameras or
    social?" -> cctv, social)."""
    return [channel for channel, words in _CHANNEL_WORDS.items() if words.search(message)]


_PRICE = re.compile(
    r"\b(price[sd]?|pricing|costs?|how much (is|are|does|do|for)|sells? for|go(es)? for)\b", re.I
)


def asks_price(message: str) -> bool:
    """A question about what something costs ("how much is it?", "what does it sell for")."""
    return _PRICE.search(message) is not None


_CONFIDENCE = re.compile(r"\b(confiden\w*|sure|certain\w*|surest)\b", re.I)


def asks_confidence(message: str) -> bool:
    """A question about how sure the detection is ("which anomaly are you most sure of?")."""
    return _CONFIDENCE.search(message) is not None
