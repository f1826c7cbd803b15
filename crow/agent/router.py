"""Intent routing for small models: small talk without tools, counts to the summary first.

A small model tends to call a tool for "Hi!" and to search when asked "how many". A message
that is only small talk (no data words at all) is answered without offering tools; a count
question about interactions gets ``get_interaction_summary`` as its first call (the spec's
"COUNT questions: get_interaction_summary first"). Settings ``agent.route_small_talk`` and
``agent.route_counts``: on for the CPU profile, off for a strong model.
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


_COUNT = re.compile(
    r"\b(how many|number of|count|total|totals|breakdown|how much traffic|tally)\b", re.I
)
_NOT_INTERACTIONS = re.compile(
    r"\b(products?|items?|skus?|patterns?|stores|locations?|employees?|members?|documents?)\b",
    re.I,
)


def is_count_question(message: str) -> bool:
    """A question asking for a number of interactions (not of products, stores, ...)."""
    if not _COUNT.search(message):
        return False
    return (
        not _NOT_INTERACTIONS.search(message)
        or re.search(r"\binteractions?\b", message, re.I) is not None
    )


_SEARCH = re.compile(
    r"\b(show|find|list|which|examples?|search|look up|what are|tell me about|describe)\b", re.I
)


def wants_more_than_a_count(message: str) -> bool:
    """A count question that also asks to see or find things (needs a second tool)."""
    return _SEARCH.search(message) is not None


_ORG_TOPICS = re.compile(
    r"\b(polic(y|ies)|returns?|refunds?|shipping|delivery|privacy|mission|values|target market|"
    r"competitors?|competition|locations?|opening hours|hours|loyalty|rewards|membership|"
    r"sustainability|founded|history|headquarters|employees|revenue|warranty|repairs?|"
    r"gift cards?|price match|careers?|guide)\b",
    re.I,
)
_ABOUT_US = re.compile(
    r"\b(about (us|our company|the company|ourselves)|our company|who we are|our business)\b", re.I
)


def is_org_question(message: str) -> bool:
    """A question the company's own knowledge base answers (policies, profile, market...)."""
    if is_count_question(message):
        return False
    return bool(_ABOUT_US.search(message)) or (
        bool(_ORG_TOPICS.search(message))
        and re.search(r"\b(our|we|us|your|you)\b", message, re.I) is not None
    )
