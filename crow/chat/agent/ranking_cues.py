"""The cues of a question that ranks detected patterns: how sure a detection is (the most or
least confident), or the extreme of a figure ("which store had the biggest jump?"). Read by
the pattern search, to lead its result with the pattern asked about. Nothing here decides
which tool is called.
"""

from __future__ import annotations

import re

_CONFIDENCE = re.compile(
    # misspelled too: "lowest confidnce" was read as no confidence question
    r"\b(conf\w{0,2}d\w*|sure|certain\w*|surest)\b"
    # the top one of a kind of pattern: a pattern's confidence is what ranks it
    r"|\b(?:top|strongest|highest)\W+(?:[a-z-]+\W+)?(?:one|patterns?|trends?|anomal\w*|"
    r"segments?|seasonal|churn\w*|affinit\w*)\b",
    re.I,
)


def asks_confidence(message: str) -> bool:
    """A question about how sure the detection is ("which anomaly are you most sure of?"), or
    for the top pattern of a kind ("and the top affinity one?": a 1.5B named the affinity
    closest to the words "top affinity")."""
    return _CONFIDENCE.search(message) is not None


_LARGEST = re.compile(
    r"\b(biggest|largest|greatest|highest|steepest|sharpest|worst|maximum)\b", re.I
)
_SMALLEST = re.compile(r"\b(smallest|lowest|mildest|minimum)\b", re.I)


def asks_extreme(message: str) -> str | None:
    """ "largest" or "smallest" for a question after the extreme of something ("which store
    had the biggest jump?"), else None; a confidence question is asks_confidence's."""
    if asks_confidence(message):
        return None
    if _SMALLEST.search(message):
        return "smallest"
    return "largest" if _LARGEST.search(message) else None


_LEAST = re.compile(r"\b(least|lowest|weakest|less|shakiest)\b", re.I)


def asks_least_confident(message: str) -> bool:
    """A confidence question about the least sure detection ("which trend are we least sure
    of?"): led with the most confident pattern, a 1.5B named it, 0.97, as the least sure."""
    return asks_confidence(message) and _LEAST.search(message) is not None


_MOST = re.compile(r"\b(most|more|highest|greatest|best|top|strongest|surest)\b", re.I)


def ranks_confidence(message: str) -> bool:
    """A confidence question that ranks ("the pattern we're most confident about?"), not one
    that asks how sure a named finding is ("how sure are you about that one?")."""
    return (
        asks_confidence(message) and (_MOST.search(message) or _LEAST.search(message)) is not None
    )


_NEWEST = re.compile(
    r"\b(?:latest|newest|most recent(?:ly)?|(?:last|recently) (?:detected|flagged|found|spotted)"
    r"|(?:detected|flagged|found|spotted) (?:last|most recently))\b",
    re.I,
)


def asks_newest(message: str) -> bool:
    """A question for the pattern detected last ("what's the latest anomaly?", "which one was
    detected most recently?"), not one a model searched with ``sort: "newest"`` on its own
    ("how many anomalies did we detect?": a 1.5B sorts every pattern call so)."""
    return _NEWEST.search(message) is not None
