"""An answer that says nothing its pattern search found: asked "are we seeing any churn risk
among customers?", a 1.5B answered "Yes, we are seeing a churn risk among customers." above a
footnote to the churn-risk pattern, and asked for the pattern it was most confident about,
"... is likely a seasonal effect." (two blind sets; a pattern's title is the answer)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from crow.chat.agent.in_words import RANKED_FIRST
from crow.chat.agent.sources import Source, with_footnotes
from crow.chat.agent.titles import states_title

_WORD = re.compile(r"[a-z0-9]{3,}")
# "No churn risk was detected", "none of the patterns", "isn't", "nothing about it".
_NEGATION = re.compile(r"\b(?:no|none|not|nothing|neither|nor)\b|n't\b", re.I)
# A pattern's figure: a share ("31%", "31 percent") or a decimal (a confidence, "0.87");
# "6 anomalies" counts the search's rows, which says nothing the patterns found.
_FIGURE = re.compile(r"\d\s?(?:%|percent\b)|\d\.\d", re.I)


def names_no_pattern(
    text: str, outputs: Sequence[tuple[str, dict[str, Any]]], returned: Sequence[Source]
) -> str | None:
    """Why an answer says nothing its pattern search found (or names not the pattern a ranking
    the question asks for put first, names_no_ranked), or None."""
    plain = with_footnotes(text, ())
    return names_no_ranked(plain, outputs) or _names_none(
        plain, [name for name, _ in outputs], returned
    )


def names_no_ranked(plain: str, outputs: Sequence[tuple[str, dict[str, Any]]]) -> str | None:
    """Asked for the newest pattern, or the one it is most (least) sure of, the answer is that
    pattern's title as written (case and spacing aside; in quotes or bold, say): a 1.5B named
    the right pattern in its own words ("a cart abandonment jump at the shipping step" for
    "Cart abandonment jump at shipping step"), the title only in the footnote, twice in one
    blind set; a share or a date does not answer which one. An answer naming any of the
    searches' firsts is left alone. Only a correction: never composed."""
    firsts = [
        c[RANKED_FIRST] for name, c in outputs if name == "search_patterns" and RANKED_FIRST in c
    ]
    if not firsts or any(states_title(plain, title) for title in firsts):
        return None
    return (
        f"The pattern your search ranked first is {firsts[-1]!r}; your answer does not name "
        "it. Start your answer with that title, word for word, then give its figures."
    )


def _names_none(plain: str, tools: Sequence[str], returned: Sequence[Source]) -> str | None:
    """Why an answer resting on the pattern search alone says nothing it found, or None: it
    names none of the patterns (every word of a title, three letters or more, in the text,
    footnotes aside) and states none of their figures (a share or a decimal: "There are 6
    anomalies." counts the rows it read). An answer with a share is left alone (asked what
    share of app users are deal hunters, "31% of app users" answers; told to name the
    pattern, the 1.5B gave its title and confidence instead of the share), and so is one
    that says there is none (a negation) or rests on another tool's results too (a product
    ranking's answer names the product). Only a correction: never composed."""
    titles = [s.title for s in returned if s.type == "pattern"]
    if not titles or set(tools) != {"search_patterns"}:
        return None
    said = set(_WORD.findall(plain.casefold()))
    named = any(set(_WORD.findall(title.casefold())) <= said for title in titles)
    if named or _NEGATION.search(plain) or _FIGURE.search(plain):
        return None
    return (
        "Your answer says nothing the pattern search found. Start your answer with the "
        "pattern's title, then give its figures."
    )
