"""The cue-word vocabulary: small talk, follow-ups, counts, rankings, channels, patterns and
their kinds, prices, the questions inside a request. Read by the intent router's refinement
and the guidance (a hint the model reads); by the tools, to lead a result with what the
question asks (what a product query names is in crow.chat.agent.product_words); by the answer
checks; and by the scripted test models. Nothing here decides which tool is called.
"""

from __future__ import annotations

import re

from crow.chat.agent.channel_cues import channels_named

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


FOLLOW_UP_WORDS = 14  # longer questions carry their own topic
_WORD = r"[\w&'-]+"
_FOLLOW_UP = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|so|right)\W+)?(and|also|only|just|what about|how about|same for)\b|\b(those|these|them|they)\b"
    # "the jackets one", "the delivery slot one": up to three words, spelled out (no nesting)
    rf"|\bthe {_WORD} one\b|\bthe {_WORD} {_WORD} one\b|\bthe {_WORD} {_WORD} {_WORD} one\b",
    re.I,
)


def is_follow_up(message: str) -> bool:
    """A short question that leans on the one before it ("And on the web?", "Which of those
    ...?", "the jackets one - which store?", "what does it cost?"): read alone, it lacks the
    topic or the filters it keeps."""
    short = len(message.split()) <= FOLLOW_UP_WORDS
    leans = bool(_FOLLOW_UP.search(message)) or only_substitutes(message)
    return (short and leans) or refers_back(message)


_IT = re.compile(r"\b(it|its|it's|that one|this one)\b", re.I)
REFERS_BACK_WORDS = 6


# "... any discount on that?": a question that ends on a pronoun is about what came before
_ENDS_ON_IT = re.compile(r"\b(?:on|for|about|with|of|to|in|from)\s+(?:that|it|this)\W*$", re.I)


def refers_back(message: str) -> bool:
    """A question of a few words about "it" ("what does it cost?", "is it in stock?", "when
    does it open?"), or one that ends on it ("do members get any discount on that?", after
    the repair time: read alone, a 1.5B answered with the loyalty program's 5% back): its
    subject is the one of the question before, so that question's tools answer it (alone,
    "cost" read as a knowledge-base question about charges)."""
    words = len(message.split())
    if words <= FOLLOW_UP_WORDS and _ENDS_ON_IT.search(message):
        return True
    return words <= REFERS_BACK_WORDS and _IT.search(message) is not None


# "and what about" and "and does that apply to" before "and": matched as "and", "and what
# about kayaks?" left a question of its own ("what about kayaks?") and was read alone. A noun
# only after "the same" ("does the same window apply to kayaks?"): "do those items count for
# points?" asks something new.
_SUBSTITUTE = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|so|right)\W+)?(?:(?:and\s+)?(?:(?:does|do|would|will) (?:that|this|"
    r"it|the same(?: [\w-]+)?|those|these) (?:also |still )?(?:apply|go|count|work) (?:to|for)|"
    r"(?:is|are) (?:it|that|this|those|these) (?:any )?(?:different|the same) (?:for|with))|"
    r"and what about|and how about|and|also|what about|how about|same for|what if)\b"
    r"(?P<rest>.*)$",
    re.I,
)
_OWN_QUESTION = re.compile(
    r"^\W*(how|which|what|who|whom|where|when|why|is|are|does|do|did|can|could|was|were|has|"
    r"have|will)\b",
    re.I,
)


def only_substitutes(message: str) -> bool:
    """A follow-up that asks the question before it again about something else ("what about
    kayaks?", "And on the web?", "ok and if it came by home delivery?", "does the same
    window apply to kayaks?", "is it different for bikes?"): its lead words are not followed
    by a question of its own, as in "and how much is it?"."""
    return substitute(message) is not None


def substitute(message: str) -> str | None:
    """What such a follow-up asks about in place of what the question before it asked
    ("october" in "and october?", "in household" in "ok and in household?"), or None for any
    other message. Empty when it names nothing ("same for?")."""
    match = _SUBSTITUTE.match(message.strip())
    if match is None or _OWN_QUESTION.match(match["rest"]) is not None:
        return None
    return match["rest"].strip(" \t?!.,;:-\"'")


def asks_again(message: str) -> bool:
    """A follow-up that is the question before it asked again, about another subject ("what
    about kayaks?") or about "it" ("what does it cost?"): read alone, it lacks what it asks.
    Not one with a question of its own ("and what if the delivery is late?")."""
    return only_substitutes(message) or refers_back(message)


_COUNT = re.compile(
    r"\b(how many|number of|count|total|totals|breakdown|how much traffic|tally)\b", re.I
)
_NOT_INTERACTIONS = re.compile(
    r"\b(products?|items?|skus?|patterns?|stores|locations?|employees?|members?|documents?|"
    r"signed up|enrolled|subscribers?)\b",
    re.I,
)


_DURATION = re.compile(
    r"\bhow many (?:\w+ )?(?:minutes|hours|days|weeks|months|years)\b(?! (?:ago|back))", re.I
)  # "how many business days does delivery take?" asks for a duration, not a count


_CHANNEL = re.compile(r"\bchannels?\b", re.I)
_RANKS = re.compile(r"\b(top|most|least|best|worst|rank\w*|popular|number one)\b", re.I)


def is_ranking(message: str) -> bool:
    """A question that ranks ("top 3", "most popular", "which sells best")."""
    return _RANKS.search(message) is not None


_RANKED_BY_COUNT = re.compile(r"\bby (?:the )?(?:number|count|total) of\b", re.I)


def is_count_question(message: str) -> bool:
    """A question asking for a number of interactions (not of products, stores, ...): also
    "how many interactions did tents get", but not "top 4 products by number of
    interactions" nor "top beverage by number of interactions", which rank products (a
    ranking of channels by it is a count)."""
    if not _COUNT.search(message) or _DURATION.search(message):
        return False
    if is_ranking(message) and _RANKED_BY_COUNT.search(message) and not _CHANNEL.search(message):
        return False
    if not _NOT_INTERACTIONS.search(message):
        return True
    return re.search(r"\binteractions?\b", message, re.I) is not None and not is_ranking(message)


def counts_a_channel(message: str) -> bool:
    """A number of interactions on a named channel ("how many social mentions did we get in
    October?"): the interactions', even when the org's profile (which names the org and
    its channels) is near."""
    return is_count_question(message) and bool(channels_named(message))


_PRICE = re.compile(
    r"\b(price[sd]?|pricing|costs?|how much (is|are|does|do|for)|sells? for|go(es)? for)\b", re.I
)


def asks_price(message: str) -> bool:
    """A question about what something costs ("how much is it?", "what does it sell for")."""
    return _PRICE.search(message) is not None


_CLAUSES = re.compile(
    r"(?:[,;]\s*(?:and\s+|but\s+|also\s+|plus\s+)?|(?<!\s)\s+(?:and|but|also|plus)\s+|"
    r"\?\s+(?:(?:and|also|plus),?\s+)?)"
    r"(?=(?:(?:what|which|how|who|where|when|why)(?:'?s)?|show|list|find|give|tell|remind|are|"
    r"is|do|does|did|can)\b)",
    re.I,
)


_ASKS = (
    r"(?:what|which|how|who|where|when|why)(?:'?s)?|is|are|do|does|did|can|could|should|"
    r"would|will|any|show|list|find|give|tell|remind"
)
_ASKING = re.compile(rf"^\W*(?:{_ASKS})\b", re.I)
# a question, a request, or a phrase that scopes the question ("Of all the jackets we carry")
_NOT_PREMISE = re.compile(
    rf"^\W*(?:{_ASKS}|of|out|among|for|in|across|from|at|on|with|between|about|and|also|plus|"
    r"but|so)\b",
    re.I,
)
PREMISE_WORDS = 4
# a head setting things side by side is the question's subject, not a premise, and so is one
# a tail points back at ("web vs social in november, how many each?")
_TOPIC_HEAD = re.compile(r"\b(?:vs\.?|versus)(?!\w)", re.I)
_POINTS_BACK = re.compile(r"\b(?:each|both|either)\b", re.I)


def asked_part(question: str) -> str:
    """The question without a statement before it that sets it up ("customer says their
    delivery came late, do they get anything back for that?" -> "do they get anything back
    for that?"): the statement's words ("customer says") are not what is asked; the router
    read them as a search of what customers say, 3 times in the evaluation sets. A head that
    sets things side by side ("web vs social in november, how many each?"), or that the tail
    points back at ("each", "both"), is what is asked about and stays."""
    head, comma, tail = question.partition(",")
    if (
        comma
        and "?" not in head
        and len(head.split()) >= PREMISE_WORDS
        and not _NOT_PREMISE.match(head)
        and not _TOPIC_HEAD.search(head)
        and not _POINTS_BACK.search(tail)
        and _ASKING.match(tail)
    ):
        return tail.strip()
    return question


def split_clauses(question: str) -> list[str]:
    """The questions inside a request ("how many X, and what Y?" -> two), if more than one."""
    parts = [p.strip(" ,;?!.") for p in _CLAUSES.split(question)]
    parts = [p for p in parts if len(p.split()) >= 3]
    return parts if len(parts) >= 2 else []


_PATTERN_WORDS = re.compile(
    r"\b(patterns?|trends?|anomal(y|ies)|segments?|behaviou?ral|churn(ing)?|affinit(y|ies))\b", re.I
)


def names_patterns(message: str) -> bool:
    """A question naming detected patterns or their kinds ("any anomalies at Bend?")."""
    return _PATTERN_WORDS.search(message) is not None


_RECENT_OR_FILLER = re.compile(
    r"\b(the|a|an|our|any|most|latest|newest|new|recent(ly)?|last|detected|flagged|found|"
    r"risks?|in|at|on|of|for|about|with|and)\b",
    re.I,
)


def pattern_topic(query: str) -> str:
    """What a pattern query is about: its words without recency words and the words for
    patterns and their kinds (_PATTERN_WORDS, _PATTERN_TYPE_WORDS); "latest out-of-stock
    anomalies" is about "out-of-stock"."""
    rest = _PATTERN_WORDS.sub(" ", _RECENT_OR_FILLER.sub(" ", query.lower()))
    for words in _PATTERN_TYPE_WORDS.values():
        rest = words.sub(" ", rest)
    return " ".join(rest.split())


def names_no_subject(query: str) -> bool:
    """A pattern query of no topic ("latest", "anomaly", "recent churn risks"): it asks for
    the patterns themselves, not for those about something ("checkout lines")."""
    return not re.sub(r"[^a-z0-9]+", "", pattern_topic(query))


_CONFIDENCE_WORDS = re.compile(r"\bconfiden(ce|t)\b", re.I)


def names_confidence(message: str) -> bool:
    """Only a detected pattern carries a confidence: "which one has the highest confidence?"
    after a list of trends, or "which anomaly are we most confident about", asks for patterns
    (the router read both as a product ranking, 5 times in the spent sets), also when the
    knowledge base is near.
    ("Are you sure?" is not about patterns: see ranking_cues.asks_confidence.)"""
    return _CONFIDENCE_WORDS.search(message) is not None


_POPULAR = re.compile(
    r"\b(most popular|best[- ]?sell\w*|top[- ]sell\w*|top sellers?|sells? (the )?best)\b", re.I
)


def asks_popularity(message: str) -> bool:
    """ "Most popular", "best-selling", "sells best": what the product search ranks by."""
    return _POPULAR.search(message) is not None


_PRODUCT_WORDS = re.compile(r"\b(products?|items?|skus?|brands?|catalog(ue)?)\b", re.I)


def names_products(message: str) -> bool:
    return _PRODUCT_WORDS.search(message) is not None


def ranks_products(message: str) -> bool:
    """A ranking of products ("what oat milk sells best?", "which two products get the most
    shopper interest?"): the product search ranks by interactions; the router sent such
    questions to the knowledge base 3 times in the spent sets."""
    return asks_popularity(message) or (is_ranking(message) and names_products(message))


_QUESTION_WORD = re.compile(
    r"^\W*(what|which|how|who|where|when|why|is|are|do|does|did|can|any)\b", re.I
)


def asks_besides_products(clause: str) -> bool:
    """A question of a split request that is not about the products it ranks: "... most
    popular meat product, and is there any detected out-of-stock problem?" (not "and what
    does it cost?", nor a fragment such as "in health & beauty")."""
    return (
        _QUESTION_WORD.match(clause) is not None
        and not ranks_products(clause)
        and not asks_price(clause)
    )


_LOOKUP = re.compile(r"^\W*(find|show|list|pull up|look up|search|give me (some|a few))\b", re.I)


def is_lookup(message: str) -> bool:
    """A request for the records themselves ("find camera events at Bend")."""
    return _LOOKUP.match(message) is not None


_COMPARED = re.compile(
    r"\b(or|vs\.?|versus|compared?|comparison|more|less|larger|bigger|smaller|busier|most)\b",
    re.I,
)
_ABOUT = re.compile(r"\b(say|said|saying|mention\w*|about)\b", re.I)


def compares_channels(message: str) -> bool:
    """A question that sets two or three channels side by side ("more activity from the
    cameras or from social?"), not a lookup of their events or of what they say."""
    return (
        len(channels_named(message)) >= 2
        and _COMPARED.search(message) is not None
        and not is_lookup(message)
        and _ABOUT.search(message) is None
    )


_TRAFFIC = re.compile(r"\b(traffic|interactions?|activity|volume|touchpoints?|busier)\b", re.I)


def names_traffic(message: str) -> bool:
    """Words for the amount of interactions ("traffic", "activity", "volume")."""
    return _TRAFFIC.search(message) is not None


_PATTERN_TYPE_WORDS = {
    "anomaly": re.compile(r"\b(anomal(y|ies|ous)|unusual)\b", re.I),
    "trend": re.compile(r"\btrend(s|ing)?\b", re.I),
    "seasonal": re.compile(r"\bseason(al|ally)?\b", re.I),
    "churn-risk": re.compile(r"\b(churn\w*|lapsed|at risk of leaving)\b", re.I),
    "affinity": re.compile(r"\b(affinit(y|ies)|bought together)\b", re.I),
    "segment": re.compile(r"\bsegments?\b", re.I),
}


def pattern_type_named(message: str) -> str | None:
    """The one kind of detected pattern a question names ("which anomaly ...?" -> anomaly),
    or None (none or several)."""
    named = [kind for kind, words in _PATTERN_TYPE_WORDS.items() if words.search(message)]
    return named[0] if len(named) == 1 else None
